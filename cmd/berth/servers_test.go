package main

import (
	"context"
	"sync"
	"time"

	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"github.com/berth-mcp/berth/internal/syncbuf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxCommands drives the user commands against a real berth with
// real sandboxes, as a script would: start, list, exec, shell, cp, stop.
func TestSandboxCommands(t *testing.T) {
	isolateHome(t)
	url, e := startServer(t)
	e.Token(t, "root")
	tok, _ := e.Token(t, "alice")
	env := envMap("BERTH_URL", url, "BERTH_TOKEN", tok)

	st := berth(t, env, nil, "start", "base", "--name", "cli-test")
	if st.err != nil {
		t.Fatalf("start: %v\n%s", st.err, st.stderr)
	}
	sid := strings.TrimSpace(st.stdout)
	if sid == "" || strings.Contains(sid, "\n") {
		t.Fatalf("start printed %q, want the server id alone", st.stdout)
	}
	if !strings.Contains(st.stderr, "registered client") || !strings.Contains(st.stderr, "RUNNING") {
		t.Errorf("start's progress on a pipe: %q", st.stderr)
	}

	t.Run("servers and clients, table and json", func(t *testing.T) {
		var list struct {
			Servers []struct{ ID, Status string }
		}
		r := berth(t, env, nil, "servers", "-o", "json")
		if r.err != nil || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Servers) != 1 || list.Servers[0].ID != sid {
			t.Fatalf("servers -o json: %v %q", r.err, r.stdout)
		}
		if r := berth(t, env, nil, "servers"); r.err != nil || !strings.Contains(r.stdout, sid) || !strings.HasPrefix(r.stdout, "ID ") {
			t.Errorf("servers: %v %q", r.err, r.stdout)
		}
		var clients struct{ Clients []struct{ ID, Name string } }
		r = berth(t, env, nil, "clients", "-o", "json")
		if r.err != nil || json.Unmarshal([]byte(r.stdout), &clients) != nil || len(clients.Clients) != 1 || clients.Clients[0].Name != "berth-cli" {
			t.Fatalf("clients -o json: %v %q", r.err, r.stdout)
		}
		if r := berth(t, env, nil, "servers", "-o", "yaml"); r.err == nil || !strings.Contains(r.err.Error(), "table or json") {
			t.Errorf("-o yaml: %v", r.err)
		}
	})

	t.Run("exec passes output and the exit code", func(t *testing.T) {
		r := berth(t, env, nil, "exec", sid, "--", "echo out; echo err >&2; exit 3")
		var code exitCode
		if !errors.As(r.err, &code) || code != 3 || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Fatalf("exec: %v stdout=%q stderr=%q", r.err, r.stdout, r.stderr)
		}
		r = berth(t, env, nil, "exec", sid, "--", "printf", "%s|", "a b", "it's", "$HOME")
		if r.err != nil || r.stdout != "a b|it's|$HOME|" {
			t.Errorf("exec with several words: %v %q", r.err, r.stdout)
		}
		var res struct {
			Stdout   string
			ExitCode int `json:"exit_code"`
		}
		r = berth(t, env, nil, "exec", sid, "-o", "json", "--", "echo hi")
		if r.err != nil || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Stdout != "hi\n" {
			t.Errorf("exec -o json: %v %q", r.err, r.stdout)
		}
		if r := berth(t, env, nil, "exec", "7d0e0a4c-0000-4000-8000-000000000000", "--", "true"); r.err == nil || !strings.Contains(r.err.Error(), "not found") {
			t.Errorf("exec on no such server: %v", r.err)
		}
		if r := berth(t, env, nil, "exec", sid); r.err == nil || !strings.Contains(r.err.Error(), "COMMAND") {
			t.Errorf("exec without a command: %v", r.err)
		}
	})

	t.Run("exec prints output as it is written", func(t *testing.T) {
		// The command waits for a file that is only created once its
		// first line has reached berth exec's stdout.
		out := &lineWatch{want: "first\n", seen: make(chan struct{})}
		done := make(chan result, 1)
		go func() {
			var errOut syncbuf.Buffer
			err := run(context.Background(), []string{"exec", sid, "--", "rm -f gate; echo first; while [ ! -e gate ]; do sleep 0.02; done; echo second; echo warn >&2; exit 5"},
				env, strings.NewReader(""), out, &errOut)
			done <- result{stdout: out.String(), stderr: errOut.String(), err: err}
		}()
		wait := time.NewTimer(90 * time.Second)
		defer wait.Stop()
		select {
		case <-out.seen:
		case r := <-done:
			t.Fatalf("exec ended before its first line was seen: %v %q %q", r.err, r.stdout, r.stderr)
		case <-wait.C:
			t.Fatalf("no first line from berth exec; stdout so far %q", out.String())
		}
		if r := berth(t, env, nil, "exec", sid, "--", "touch gate"); r.err != nil {
			t.Fatalf("touch gate: %v %s", r.err, r.stderr)
		}
		var r result
		select {
		case r = <-done:
		case <-wait.C:
			t.Fatal("berth exec did not end once the gate was open")
		}
		var code exitCode
		if !errors.As(r.err, &code) || code != 5 || r.stdout != "first\nsecond\n" || r.stderr != "warn\n" {
			t.Fatalf("exec: %v stdout=%q stderr=%q", r.err, r.stdout, r.stderr)
		}
	})

	t.Run("exec keeps head and tail of long output", func(t *testing.T) {
		r := berth(t, env, nil, "exec", sid, "--", "head -c 3000000 /dev/zero | tr '\\0' y; echo; echo end")
		if r.err != nil || !strings.HasPrefix(r.stdout, "yyy") || !strings.HasSuffix(r.stdout, "yyy\nend\n") || !strings.Contains(r.stdout, "bytes omitted") {
			t.Fatalf("exec: %v stdout %d bytes", r.err, len(r.stdout))
		}
		if len(r.stdout) > 1<<20+100 || !strings.Contains(r.stderr, "output cut") {
			t.Fatalf("stdout %d bytes, stderr %q", len(r.stdout), r.stderr)
		}
	})

	t.Run("exec ends at its timeout", func(t *testing.T) {
		r := berth(t, env, nil, "exec", sid, "--timeout", "1s", "--", "echo started; sleep 1000")
		var code exitCode
		if !errors.As(r.err, &code) || code != 124 || r.stdout != "started\n" || !strings.Contains(r.stderr, "killed at its timeout") {
			t.Fatalf("exec: %v stdout=%q stderr=%q", r.err, r.stdout, r.stderr)
		}
	})

	t.Run("shell over a pipe keeps its state", func(t *testing.T) {
		in := strings.NewReader("cd /tmp\npwd\nexport GREETING=hello\n\necho $GREETING\nfalse\n")
		r := berth(t, env, in, "shell", sid)
		var code exitCode
		if !errors.As(r.err, &code) || code != 1 || r.stdout != "/tmp\nhello\n" {
			t.Fatalf("shell: %v %q %q", r.err, r.stdout, r.stderr)
		}
		if r := berth(t, env, strings.NewReader("echo $GREETING\n"), "shell", sid); r.err != nil || r.stdout != "hello\n" {
			t.Errorf("the session did not persist: %v %q", r.err, r.stdout)
		}
	})

	t.Run("cp round trip", func(t *testing.T) {
		src := t.TempDir()
		os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
		os.WriteFile(filepath.Join(src, "top.txt"), []byte("top\n"), 0o644)
		os.WriteFile(filepath.Join(src, "a", "b", "deep.txt"), bytes.Repeat([]byte("x"), 100000), 0o644)
		if r := berth(t, env, nil, "cp", src, sid+":up"); r.err != nil {
			t.Fatalf("cp up: %v %s", r.err, r.stderr)
		}
		if r := berth(t, env, nil, "exec", sid, "--", "cat up/top.txt; wc -c < up/a/b/deep.txt"); r.err != nil || r.stdout != "top\n100000\n" {
			t.Fatalf("the upload on the server: %v %q", r.err, r.stdout)
		}
		dst := filepath.Join(t.TempDir(), "down")
		if r := berth(t, env, nil, "cp", sid+":up", dst); r.err != nil {
			t.Fatalf("cp down: %v", r.err)
		}
		for _, f := range []string{"top.txt", "a/b/deep.txt"} {
			want, _ := os.ReadFile(filepath.Join(src, f))
			got, err := os.ReadFile(filepath.Join(dst, f))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s came back as %d bytes (%v), want %d", f, len(got), err, len(want))
			}
		}
		one := filepath.Join(t.TempDir(), "one.txt")
		os.WriteFile(one, []byte("1\n"), 0o644)
		if r := berth(t, env, nil, "cp", "-o", "json", one, sid+":"); r.err != nil || !strings.Contains(r.stdout, `"bytes"`) {
			t.Errorf("cp a file -o json: %v %q", r.err, r.stdout)
		}
		if r := berth(t, env, nil, "exec", sid, "--", "cat one.txt"); r.stdout != "1\n" {
			t.Errorf("the file is not in the workspace root: %q", r.stdout)
		}
		for _, bad := range [][]string{{src, sid + ":../escape"}, {sid + ":../..", dst}} {
			if r := berth(t, env, nil, append([]string{"cp"}, bad...)...); r.err == nil || !strings.Contains(r.err.Error(), "..") {
				t.Errorf("cp %v: %v, want it refused naming the path", bad, r.err)
			} else {
				t.Logf("cp %v: %v", bad, r.err)
			}
		}
		if r := berth(t, env, nil, "cp", src, dst); r.err == nil || !strings.Contains(r.err.Error(), "exactly one") {
			t.Errorf("cp local local: %v", r.err)
		}
	})

	t.Run("ops and tokens", func(t *testing.T) {
		var ops []struct{ Name, REST string }
		r := berth(t, env, nil, "ops", "-o", "json")
		if r.err != nil || json.Unmarshal([]byte(r.stdout), &ops) != nil || len(ops) < 20 {
			t.Fatalf("ops -o json: %v %.200q", r.err, r.stdout)
		}
		r = berth(t, env, nil, "tokens", "create", "--name", "from-tokens", "--expires", "1h")
		if r.err != nil || !strings.HasPrefix(r.stdout, "berth_") {
			t.Fatalf("tokens create: %v %q", r.err, r.stdout)
		}
		if r := berth(t, env, nil, "tokens", "list"); r.err != nil || !strings.Contains(r.stdout, "from-tokens") {
			t.Errorf("tokens list: %v %q", r.err, r.stdout)
		}
	})

	t.Run("stop", func(t *testing.T) {
		if r := berth(t, env, nil, "stop", sid); r.err != nil || !strings.Contains(r.stdout, sid) {
			t.Fatalf("stop: %v %q", r.err, r.stdout)
		}
		r := berth(t, env, nil, "servers")
		if strings.Contains(r.stdout, "RUNNING") {
			t.Errorf("the stopped server still runs: %q", r.stdout)
		}
	})
}

// TestExtractRefusesEscapes: an archive from a sandbox (whose root can
// replace the agent) cannot write outside the destination.
func TestExtractRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../evil", "a/../../evil", "/abs/evil", `..\evil`} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: "ok.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
			tw.Write([]byte("ok"))
			tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
			tw.Write([]byte("evil"))
			tw.Close()
			_, err := extractTar(&buf, filepath.Join(parent, "dst"))
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("extract %q: %v, want it refused", name, err)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
				t.Fatal("the archive wrote outside the destination")
			}
		})
	}
	t.Run("a symlink is not followed out", func(t *testing.T) {
		parent := t.TempDir()
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "link", Linkname: parent, Typeflag: tar.TypeSymlink})
		tw.WriteHeader(&tar.Header{Name: "link/evil", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
		tw.Write([]byte("evil"))
		tw.Close()
		extractTar(&buf, filepath.Join(parent, "dst"))
		if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
			t.Fatal("the archive wrote through a symlink")
		}
	})
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if r := berth(t, envMap(), nil, "completion", sh); r.err != nil || !strings.Contains(r.stdout, "berth") {
			t.Errorf("completion %s: %v", sh, r.err)
		}
	}
}

// lineWatch is a stdout that closes seen once what was written holds
// want, so a test can act while the command still runs.
type lineWatch struct {
	syncbuf.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.Buffer.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
