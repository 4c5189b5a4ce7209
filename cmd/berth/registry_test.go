package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/berth-mcp/berth/internal/version"
)

// registrySchema compiles the MCP registry's server.json schema: the
// copy shared with the team when it is there, else the one kept in
// testdata.
func registrySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	path := filepath.Join("..", "..", "..", "shared", "schemas", "server.schema.2025-12-11.json")
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join("testdata", "server.schema.2025-12-11.json")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("schema %s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const id = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return sch
}

// entry reads server.json as the registry would.
func entry(t *testing.T, raw []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("server.json: %v", err)
	}
	return v
}

// TestServerJSONIsAPublishableRegistryEntry validates server.json, the
// MCP registry entry, against the registry's schema, and checks what the
// schema cannot: a namespace the project can prove (its GitHub owner),
// the binary's release version, and a remote whose URL a user completes
// with their own host.
func TestServerJSONIsAPublishableRegistryEntry(t *testing.T) {
	sch := registrySchema(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(entry(t, raw)); err != nil {
		t.Fatalf("server.json does not validate: %v", err)
	}
	// The schema can refuse: a broken copy fails.
	if err := sch.Validate(entry(t, []byte(`{"name": "no slash", "description": "x"}`))); err == nil {
		t.Fatal("the schema accepted an entry without a version and with a bad name")
	}
	e := entry(t, raw).(map[string]any)
	repo := e["repository"].(map[string]any)["url"].(string)
	owner := strings.Split(strings.TrimPrefix(repo, "https://github.com/"), "/")[0]
	if want := "io.github." + owner + "/berth"; e["name"] != want {
		t.Errorf("name %v: publish under the namespace GitHub proves for the repository, %s", e["name"], want)
	}
	if e["version"] != version.Release {
		t.Errorf("server.json version %v, the binary's release version is %s", e["version"], version.Release)
	}
	if d := e["description"].(string); len(d) > 100 {
		t.Errorf("description is %d characters, the registry allows 100", len(d))
	}

	remotes := e["remotes"].([]any)
	if len(remotes) != 1 {
		t.Fatalf("want one remote, got %v", remotes)
	}
	remote := remotes[0].(map[string]any)
	if remote["type"] != "streamable-http" {
		t.Fatalf("remote type %v, want streamable-http", remote["type"])
	}
	vars := remote["variables"].(map[string]any)
	placeholders := regexp.MustCompile(`\{([a-z_]+)\}`).FindAllStringSubmatch(remote["url"].(string), -1)
	if len(placeholders) == 0 {
		t.Fatalf("remote URL %v has no variable for the user's host", remote["url"])
	}
	// A user's own host fills the URL into one the client can use, and
	// the entry with it filled in still validates.
	filled := remote["url"].(string)
	for _, m := range placeholders {
		v, ok := vars[m[1]].(map[string]any)
		if !ok || v["isRequired"] != true {
			t.Fatalf("URL variable %s is not declared as required", m[1])
		}
		filled = strings.ReplaceAll(filled, m[0], "sandboxes.acme.test:8443")
	}
	u, err := url.Parse(filled)
	if err != nil || u.Scheme != "https" || u.Host != "sandboxes.acme.test:8443" || u.Path != "/mcp" {
		t.Fatalf("with a user's host the remote URL is %q (%v)", filled, err)
	}
	filledEntry := bytes.Replace(raw, []byte(remote["url"].(string)), []byte(filled), 1)
	if err := sch.Validate(entry(t, filledEntry)); err != nil {
		t.Errorf("the entry with a user's host does not validate: %v", err)
	}
}
