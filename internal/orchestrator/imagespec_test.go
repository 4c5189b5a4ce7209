package orchestrator_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestParseImageSpecs(t *testing.T) {
	doc := `images:
  - name: py-env
    base: base
    runtime_class_name: gvisor
    resources: {cpu: "2", memory: 4Gi}
    timeout_seconds: 600
    env:
      PIP_NO_CACHE: 1
      MODE: fast
    files:
      setup.cfg: |
        [metadata]
        name = x
      src/app.py: print("hi")
    commands:
      - mkdir -p out
      - echo built > out/marker
  # IdeGYM dumps every field; empty ones say nothing.
  - name: second.v2
    base: py-env
    plugins: []
    platforms: []
    secrets: {}
    base_dockerfile: null
    commands: [true]
`
	got, err := orchestrator.ParseImageSpecs(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []orchestrator.ImageSpec{{
		Name: "py-env", Base: "base", RuntimeClassName: "gvisor", TimeoutSeconds: 600,
		Resources: store.Resources{CPU: "2", Memory: "4Gi"},
		Env:       map[string]string{"PIP_NO_CACHE": "1", "MODE": "fast"}, EnvKeys: []string{"MODE", "PIP_NO_CACHE"},
		Files:    []runtime.File{{Path: "setup.cfg", Content: "[metadata]\nname = x\n"}, {Path: "src/app.py", Content: `print("hi")`}},
		Commands: []string{"mkdir -p out", "echo built > out/marker"}, Line: 2,
	}, {
		Name: "second.v2", Base: "py-env", Commands: []string{"true"}, Files: []runtime.File{}, EnvKeys: []string{}, Line: 19,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// TestImageSpecErrors: every refusal is a bad request that names the
// field and its line.
func TestImageSpecErrors(t *testing.T) {
	img := func(lines ...string) string {
		return "images:\n  - name: ok\n    base: base\n" + strings.Join(lines, "\n") + "\n"
	}
	for _, c := range []struct {
		name, doc string
		want      []string // in the message
	}{
		{"empty", "", []string{"empty document"}},
		{"syntax", "images: [\n", []string{"yaml: line"}},
		{"two documents", "images: []\n---\nimages: []\n", []string{"more than one document"}},
		{"not a mapping", "- a\n", []string{"document (line 1)", "mapping"}},
		{"unknown top field", "images: []\nextra: 1\n", []string{"extra (line 2)", "unknown field"}},
		{"no images", "other: 1\n", []string{"unknown field"}},
		{"images not a list", "images: {a: 1}\n", []string{"images (line 1)", "list"}},
		{"no image", "images: []\n", []string{"images (line 1)", "empty"}},
		{"image not a mapping", "images:\n  - just-a-name\n", []string{"images[0] (line 2)"}},
		{"unknown field", img("    dockerfile: FROM x"), []string{"images[0].dockerfile (line 4)", "unknown field", "name, base, commands, env, files"}},
		{"duplicate field", img("    commands: [a]", "    commands: [b]"), []string{"images[0].commands (line 5)", "duplicate key", "line 4"}},
		{"duplicate image", "images:\n  - {name: a, base: b, commands: [x]}\n  - {name: a, base: b, commands: [y]}\n", []string{"images[1].name (line 3)", "line 2"}},
		{"no name", "images:\n  - base: b\n    commands: [x]\n", []string{"images[0].name (line 2)", "required"}},
		{"no base", "images:\n  - name: a\n    commands: [x]\n", []string{"images[0].base (line 2)", "required"}},
		{"nothing to build", img(), []string{"images[0] (line 2)", "nothing to build"}},
		{"bad name", "images:\n  - name: My_Image!\n    base: b\n    commands: [x]\n", []string{"images[0].name (line 2)", "lowercase"}},
		{"name with slash", "images:\n  - name: org/img\n    base: b\n    commands: [x]\n", []string{"images[0].name (line 2)"}},
		{"name with dots", "images:\n  - name: a..b\n    base: b\n    commands: [x]\n", []string{"images[0].name (line 2)"}},
		{"long name", "images:\n  - name: " + strings.Repeat("a", 64) + "\n    base: b\n    commands: [x]\n", []string{"images[0].name (line 2)", "63"}},
		{"null name", "images:\n  - name:\n    base: b\n    commands: [x]\n", []string{"images[0].name (line 2)", "no value"}},
		{"base with space", "images:\n  - name: a\n    base: a b\n    commands: [x]\n", []string{"images[0].base (line 3)"}},
		{"empty command", img("    commands:", "      - echo one", "      - '  '"), []string{"images[0].commands[1] (line 6)", "empty command"}},
		{"commands not a list", img("    commands: make"), []string{"images[0].commands (line 4)", "list"}},
		{"command is a list", img("    commands: [[a]]"), []string{"images[0].commands[0] (line 4)"}},
		{"bad env name", img("    commands: [x]", "    env: {1A: x}"), []string{"images[0].env.1A (line 5)", "variable name"}},
		{"env not a mapping", img("    commands: [x]", "    env: [A]"), []string{"images[0].env (line 5)"}},
		{"absolute file", img("    files: {/etc/passwd: x}"), []string{"images[0].files./etc/passwd (line 4)", "relative"}},
		{"escaping file", img("    files: {../x: y}"), []string{"images[0].files.../x (line 4)"}},
		{"unclean file", img("    files: {a//b: y}"), []string{"images[0].files.a//b (line 4)"}},
		{"file content a list", img("    files: {a: [1]}"), []string{"images[0].files.a (line 4)"}},
		{"bad resources", img("    commands: [x]", "    resources: {cpu: lots}"), []string{"images[0].resources (line 5)", "cpu"}},
		{"idegym resources", img("    commands: [x]", "    resources:", "      limits: {cpu: 1}"), []string{"images[0].resources.limits (line 6)", "{cpu, memory}"}},
		{"bad runtime class", img("    commands: [x]", "    runtime_class_name: Not_Valid"), []string{"images[0].runtime_class_name (line 5)"}},
		{"bad timeout", img("    commands: [x]", "    timeout_seconds: -1"), []string{"images[0].timeout_seconds (line 5)"}},
		{"idegym plugins", img("    commands: [x]", "    plugins:", "      - type: pycharm"), []string{"images[0].plugins (line 5)", "berth does not", "commands and files"}},
		{"idegym dockerfile", img("    base_dockerfile: FROM x"), []string{"images[0].base_dockerfile (line 4)", "berth does not"}},
		{"alias", "images:\n  - &a {name: a, base: b, commands: [x]}\n  - *a\n", []string{"line 2", "aliases"}},
		{"too large", "images: [" + strings.Repeat(" ", 1<<20) + "]", []string{"at most"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := orchestrator.ParseImageSpecs(c.doc)
			if err == nil {
				t.Fatalf("accepted %q", c.doc)
			}
			d := wire.DetailOf(err)
			if d.Code != wire.CodeBadRequest {
				t.Fatalf("code %s (%s), want bad_request", d.Code, d.Message)
			}
			for _, w := range c.want {
				if !strings.Contains(d.Message, w) {
					t.Fatalf("message %q does not contain %q", d.Message, w)
				}
			}
		})
	}
}
