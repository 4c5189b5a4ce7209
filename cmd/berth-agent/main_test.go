package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestTokenFileRules(t *testing.T) {
	dir := t.TempDir()
	good := strings.Repeat("a", 32)
	cases := []struct {
		name, content, wantErr string
	}{
		{"ok", good, ""},
		{"trailing newline ignored", good + "\n", ""},
		{"too short", "short\n", "at least 32"},
		{"empty", "", "empty"},
		{"inner whitespace", strings.Repeat("a", 20) + " " + strings.Repeat("b", 20), "whitespace"},
		{"two lines", good + "\n" + good + "\n", "whitespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			os.WriteFile(f, []byte(c.content), 0o600)
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a valid configuration starts and stops at once
			err := run(ctx, []string{"--listen", "127.0.0.1:0", "--workspace", dir, "--token-file", f}, envOf(nil), &bytes.Buffer{}, &stderr, nil)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("want start, got %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("want error mentioning %q, got %v", c.wantErr, err)
			}
		})
	}
}

func TestRefusesToStartWithoutToken(t *testing.T) {
	err := run(context.Background(), []string{"--workspace", t.TempDir()}, envOf(nil), &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("want a no-token error, got %v", err)
	}
}

func TestInsecureNoAuthWarnsLoudly(t *testing.T) {
	var stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, []string{"--workspace", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-no-auth"}, envOf(nil), &bytes.Buffer{}, &stderr, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "AUTHENTICATION IS OFF") {
		t.Fatalf("no warning in %q", stderr.String())
	}
}

// TestServesOnUnixSocketFromEnvironment starts the agent configured only
// through BERTH_AGENT_* variables on a unix socket, calls it, and stops it
// by cancelling the context as SIGTERM would.
func TestServesOnUnixSocketFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	token := strings.Repeat("t", 40)
	env := envOf(map[string]string{
		"BERTH_AGENT_LISTEN":    "unix:" + sock,
		"BERTH_AGENT_WORKSPACE": dir,
		"BERTH_AGENT_TOKEN":     token,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, &bytes.Buffer{}, &bytes.Buffer{}, nil) }()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://agent/api/capabilities", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("capabilities: %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent never answered on %s: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop after cancel")
	}
}

// TestAgentStaysSmall keeps the agent free of the server's heavy
// dependencies: it runs in every sandbox image.
func TestAgentStaysSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, forbidden := range []string{"github.com/jackc/pgx", "k8s.io/client-go", "github.com/berth-mcp/berth/internal/orchestrator", "github.com/berth-mcp/berth/internal/store"} {
		if strings.Contains(string(out), forbidden) {
			t.Errorf("berth-agent depends on %s", forbidden)
		}
	}
}

// TestInstallCopiesItself is what a Kubernetes sandbox's init container
// does: the copy is the same program and runs.
func TestInstallCopiesItself(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "berth-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "berth-agent"), "--version").CombinedOutput()
	if err != nil || len(out) == 0 {
		t.Fatalf("the installed copy: %v %q", err, out)
	}
	if st, err := os.Stat(filepath.Join(dir, "berth-agent")); err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("installed mode: %v %v", st, err)
	}
}

// TestKeepsOnlyTheDescriptorsItIsHanded: the agent closes what it
// inherited before it opens anything, sparing only the listener and token
// descriptors its flags (or their environment variables) name.
func TestKeepsOnlyTheDescriptorsItIsHanded(t *testing.T) {
	stop := errors.New("stop here")
	for _, c := range []struct {
		args []string
		env  map[string]string
		want []int
	}{
		{[]string{"--listen", "fd:3", "--token-fd", "4"}, nil, []int{3, 4}},
		{nil, map[string]string{"BERTH_AGENT_LISTEN": "fd:7", "BERTH_AGENT_TOKEN_FD": "9"}, []int{7, 9}},
		{[]string{"--listen", "127.0.0.1:0"}, nil, nil},
	} {
		var got []int
		called := false
		err := run(context.Background(), append(c.args, "--workspace", t.TempDir()), envOf(c.env), &bytes.Buffer{}, &bytes.Buffer{},
			func(keep ...int) error { called, got = true, keep; return stop })
		if !errors.Is(err, stop) || !called || !slices.Equal(got, c.want) {
			t.Errorf("%v %v: kept %v (called %v, run returned %v), want %v", c.args, c.env, got, called, err, c.want)
		}
	}
}
