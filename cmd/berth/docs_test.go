package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferencePagesAreCurrent fails when a page under docs/reference is
// not what `berth docs` writes from the catalogue, the OpenAPI document
// and the flags: an operation, route or flag added, renamed or described
// anew without the reference following.
func TestReferencePagesAreCurrent(t *testing.T) {
	root := newRootCmd(&env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	pages, err := referencePages(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", name))
		if err != nil {
			t.Errorf("docs/reference/%s: %v; run `go run ./cmd/berth docs`", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/reference/%s is stale: run `go run ./cmd/berth docs` and commit the result", name)
		}
	}
	for _, want := range []string{"create_token", "start_server", "`--listen`", "BERTH_DATABASE_URL", "/api/tokens"} {
		all := string(pages["tools.md"]) + string(pages["config.md"]) + string(pages["rest.md"])
		if !strings.Contains(all, want) {
			t.Errorf("the reference does not mention %s", want)
		}
	}
}
