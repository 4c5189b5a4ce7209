package mcpgw

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewRequiresBackend(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Backend") {
		t.Fatalf("New without backend: err = %v, want one naming Backend", err)
	}
	if _, err := New(Options{Backend: dirBackend{t.TempDir()}, RetryInterval: -1}); err == nil {
		t.Fatal("New with negative RetryInterval: want an error")
	}
}

func TestInitializeAndToolsList(t *testing.T) {
	h := newHarness(t, nil)
	init := h.session.InitializeResult()
	if init.ServerInfo.Name != "berth-agent" || init.ServerInfo.Version != "1.2.3" {
		t.Errorf("server info = %+v", init.ServerInfo)
	}
	if !strings.Contains(init.Instructions, "relative to the workspace root") || !strings.Contains(init.Instructions, "bash") {
		t.Errorf("instructions %q do not name the tools and workspace-relative paths", init.Instructions)
	}

	tools := h.toolNames(t)
	type want struct {
		required             []string
		props                []string
		readOnly, idempotent bool
		destructive          bool
	}
	wants := map[string]want{
		"create_file": {[]string{"content", "path"}, []string{"path", "content", "overwrite"}, false, true, true},
		"edit_file":   {[]string{"end_line", "new_content", "path", "start_line"}, []string{"path", "start_line", "end_line", "new_content"}, false, false, true},
		"patch_file":  {[]string{"patch", "path"}, []string{"path", "patch"}, false, false, true},
		"read_file":   {[]string{"path"}, []string{"path", "offset", "limit"}, true, true, false},
		"bash":        {[]string{"command"}, []string{"command", "timeout", "session"}, false, false, true},
	}
	for name, w := range wants {
		tool, ok := tools[name]
		if !ok {
			t.Errorf("tools/list lacks %s", name)
			continue
		}
		if len(tool.Description) < 40 {
			t.Errorf("%s: description %q is too thin to act on", name, tool.Description)
		}
		var schema struct {
			Type       string `json:"type"`
			Required   []string
			Properties map[string]struct {
				Type        string          `json:"type"`
				Description string          `json:"description"`
				Minimum     *float64        `json:"minimum"`
				Default     json.RawMessage `json:"default"`
			}
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s schema: %v", name, err)
		}
		if schema.Type != "object" {
			t.Errorf("%s: schema type %q", name, schema.Type)
		}
		req := slices.Sorted(slices.Values(schema.Required))
		if !slices.Equal(req, w.required) {
			t.Errorf("%s: required = %v, want %v", name, req, w.required)
		}
		for _, p := range w.props {
			if schema.Properties[p].Description == "" {
				t.Errorf("%s: property %s has no description (schema %s)", name, p, raw)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", name)
		}
		a := tool.Annotations
		if a == nil {
			t.Errorf("%s: no annotations", name)
			continue
		}
		if a.ReadOnlyHint != w.readOnly || a.IdempotentHint != w.idempotent {
			t.Errorf("%s: readOnly=%v idempotent=%v, want %v %v", name, a.ReadOnlyHint, a.IdempotentHint, w.readOnly, w.idempotent)
		}
		if !w.readOnly && (a.DestructiveHint == nil || *a.DestructiveHint != w.destructive) {
			t.Errorf("%s: destructiveHint = %v, want %v", name, a.DestructiveHint, w.destructive)
		}
		if name == "edit_file" && (schema.Properties["start_line"].Minimum == nil || *schema.Properties["start_line"].Minimum != 1) {
			t.Errorf("edit_file: start_line has no minimum 1")
		}
		if name == "bash" && string(schema.Properties["session"].Default) != `"default"` {
			t.Errorf("bash: session default = %s", schema.Properties["session"].Default)
		}
	}
}

func TestFileTools(t *testing.T) {
	h := newHarness(t, nil)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(h.ws, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	res := h.call(t, "create_file", map[string]any{"path": "dir/a.txt", "content": "one\ntwo\nthree\n"})
	if res.IsError {
		t.Fatalf("create_file: %s", resultText(res))
	}
	if got := read("dir/a.txt"); got != "one\ntwo\nthree\n" {
		t.Fatalf("file after create = %q", got)
	}
	if s := structured(t, res); s["path"] != "dir/a.txt" || s["lines"] != float64(3) || s["bytes"] != float64(14) {
		t.Errorf("create_file structured = %v", s)
	}

	res = h.call(t, "create_file", map[string]any{"path": "dir/a.txt", "content": "x"})
	if !res.IsError || !strings.Contains(resultText(res), "create dir/a.txt: file exists; set overwrite to replace it") {
		t.Fatalf("create over existing file: isError=%v text %q", res.IsError, resultText(res))
	}
	if got := read("dir/a.txt"); got != "one\ntwo\nthree\n" {
		t.Fatalf("refused create changed the file: %q", got)
	}
	if res = h.call(t, "create_file", map[string]any{"path": "b.txt", "content": "old\n"}); res.IsError {
		t.Fatal(resultText(res))
	}
	if res = h.call(t, "create_file", map[string]any{"path": "b.txt", "content": "new\n", "overwrite": true}); res.IsError || read("b.txt") != "new\n" {
		t.Fatalf("overwrite: isError=%v text %q file %q", res.IsError, resultText(res), read("b.txt"))
	}

	res = h.call(t, "edit_file", map[string]any{"path": "dir/a.txt", "start_line": 2, "end_line": 2, "new_content": "TWO\nTWO-B\n"})
	if res.IsError {
		t.Fatalf("edit_file: %s", resultText(res))
	}
	if got := read("dir/a.txt"); got != "one\nTWO\nTWO-B\nthree\n" {
		t.Fatalf("file after edit = %q", got)
	}
	res = h.call(t, "edit_file", map[string]any{"path": "dir/a.txt", "start_line": 9, "end_line": 9, "new_content": ""})
	if !res.IsError || !strings.Contains(resultText(res), "out of range") {
		t.Fatalf("edit out of range: isError=%v %q", res.IsError, resultText(res))
	}
	// The schema's minimum rejects line 0 before the backend sees it.
	res = h.call(t, "edit_file", map[string]any{"path": "dir/a.txt", "start_line": 0, "end_line": 0, "new_content": ""})
	if !res.IsError || !strings.Contains(resultText(res), "start_line") {
		t.Fatalf("edit start_line 0: isError=%v %q", res.IsError, resultText(res))
	}

	patch := "--- a/dir/a.txt\n+++ b/dir/a.txt\n@@ -3,2 +3,2 @@\n TWO-B\n-three\n+THREE\n"
	res = h.call(t, "patch_file", map[string]any{"path": "dir/a.txt", "patch": patch})
	if res.IsError {
		t.Fatalf("patch_file: %s", resultText(res))
	}
	if got := read("dir/a.txt"); got != "one\nTWO\nTWO-B\nTHREE\n" {
		t.Fatalf("file after patch = %q", got)
	}
	res = h.call(t, "patch_file", map[string]any{"path": "dir/a.txt", "patch": patch})
	if !res.IsError || !strings.Contains(resultText(res), "hunk 1 does not apply") {
		t.Fatalf("re-applied patch: isError=%v %q", res.IsError, resultText(res))
	}

	res = h.call(t, "read_file", map[string]any{"path": "dir/a.txt", "offset": 2, "limit": 2})
	if res.IsError {
		t.Fatalf("read_file: %s", resultText(res))
	}
	s := structured(t, res)
	if s["content"] != "TWO\nTWO-B\n" || s["offset"] != float64(2) || s["returned"] != float64(2) || s["total_lines"] != float64(4) || s["eof"] != false {
		t.Errorf("read_file structured = %v", s)
	}
	res = h.call(t, "read_file", map[string]any{"path": "dir/a.txt"})
	if s := structured(t, res); s["content"] != "one\nTWO\nTWO-B\nTHREE\n" || s["eof"] != true {
		t.Errorf("read_file defaults = %v", s)
	}
	res = h.call(t, "read_file", map[string]any{"path": "missing.txt"})
	if !res.IsError || resultText(res) != "read missing.txt: no such file" {
		t.Fatalf("read missing: isError=%v %q", res.IsError, resultText(res))
	}
	res = h.call(t, "read_file", map[string]any{"path": "../outside"})
	if !res.IsError || !strings.Contains(resultText(res), "must stay inside the workspace") {
		t.Fatalf("read outside: isError=%v %q", res.IsError, resultText(res))
	}
	res = h.call(t, "read_file", map[string]any{})
	if !res.IsError || !strings.Contains(resultText(res), "path") {
		t.Fatalf("read without path: isError=%v %q", res.IsError, resultText(res))
	}
}

func TestBashTool(t *testing.T) {
	h := newHarness(t, nil)

	res := h.call(t, "bash", map[string]any{"command": "echo out; echo err >&2; echo \"$BERTH_SESSION\"; pwd"})
	if res.IsError {
		t.Fatalf("bash: %s", resultText(res))
	}
	s := structured(t, res)
	if s["stdout"] != "out\ndefault\n"+h.ws+"\n" || s["stderr"] != "err\n" || s["exit_code"] != float64(0) {
		t.Errorf("bash structured = %v", s)
	}

	res = h.call(t, "bash", map[string]any{"command": "echo $BERTH_SESSION; exit 3", "session": "build"})
	if res.IsError {
		t.Fatalf("non-zero exit must be a normal result: %s", resultText(res))
	}
	if s := structured(t, res); s["exit_code"] != float64(3) || s["stdout"] != "build\n" {
		t.Errorf("exit 3 structured = %v", s)
	}

	res = h.call(t, "bash", map[string]any{"command": "sleep 30", "timeout": 0.2})
	if res.IsError {
		t.Fatalf("timeout must be a normal result: %s", resultText(res))
	}
	if s := structured(t, res); s["timed_out"] != true {
		t.Errorf("timeout structured = %v", s)
	}

	res = h.call(t, "bash", map[string]any{"command": ""})
	if !res.IsError || resultText(res) != "command is required" {
		t.Fatalf("empty command: isError=%v %q", res.IsError, resultText(res))
	}
	res = h.call(t, "bash", map[string]any{"timeout": 1})
	if !res.IsError || !strings.Contains(resultText(res), "command") {
		t.Fatalf("missing command: isError=%v %q", res.IsError, resultText(res))
	}
	res = h.call(t, "bash", map[string]any{"command": "true", "timeout": -1})
	if !res.IsError || !strings.Contains(resultText(res), "timeout") {
		t.Fatalf("negative timeout: isError=%v %q", res.IsError, resultText(res))
	}
}
