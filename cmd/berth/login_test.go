package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/cliconfig"
)

func TestLoginWhoamiLogout(t *testing.T) {
	home := isolateHome(t)
	url, e := startServer(t)
	tok, _ := e.Token(t, "alice")
	getenv := envMap()
	path := filepath.Join(home, ".config", "berth", "config.json")

	t.Run("login saves an owner-only file", func(t *testing.T) {
		r := berth(t, getenv, nil, "login", "--url", url+"/", "--token", tok)
		if r.err != nil {
			t.Fatalf("login: %v\n%s", r.err, r.stderr)
		}
		if !strings.Contains(r.stdout, "as alice") {
			t.Errorf("login said %q, want it to name alice", r.stdout)
		}
		if strings.Contains(r.stdout+r.stderr, tok) {
			t.Errorf("login printed the token")
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("config not at the user config dir: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("config mode %v, want 0600", fi.Mode().Perm())
		}
		di, err := os.Stat(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if di.Mode().Perm() != 0o700 {
			t.Errorf("config dir mode %v, want 0700", di.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		var c cliconfig.Config
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("config is not JSON: %v", err)
		}
		if c.URL != url || c.Token != tok {
			t.Errorf("config holds url %q (token ok: %v), want %q without the trailing slash", c.URL, c.Token == tok, url)
		}
		// Only the config itself is left: the temporary file was renamed.
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Errorf("config dir holds %d entries, want 1", len(entries))
		}
	})

	t.Run("whoami uses the saved login", func(t *testing.T) {
		r := berth(t, getenv, nil, "whoami")
		if r.err != nil {
			t.Fatalf("whoami: %v", r.err)
		}
		if !strings.Contains(r.stdout, "user:       alice") || !strings.Contains(r.stdout, url) {
			t.Errorf("whoami printed:\n%s", r.stdout)
		}
		if strings.Contains(r.stdout, tok) {
			t.Errorf("whoami printed the token")
		}
	})

	t.Run("login reads the token from stdin", func(t *testing.T) {
		bob, _ := e.Token(t, "bob")
		other := filepath.Join(t.TempDir(), "sub", "c.json")
		r := berth(t, getenv, strings.NewReader("\n"+bob+"\n"), "login", "--url", url, "--token", "-", "--config", other)
		if r.err != nil {
			t.Fatalf("login --token -: %v", r.err)
		}
		c, err := cliconfig.Load(other)
		if err != nil || c.Token != bob {
			t.Fatalf("saved %+v, %v; want bob's token", c.URL, err)
		}
		r = berth(t, getenv, nil, "whoami", "--config", other)
		if r.err != nil || !strings.Contains(r.stdout, "bob") {
			t.Errorf("whoami --config: %v\n%s", r.err, r.stdout)
		}
	})

	t.Run("logout removes it", func(t *testing.T) {
		r := berth(t, getenv, nil, "logout")
		if r.err != nil {
			t.Fatalf("logout: %v", r.err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("config still there after logout: %v", err)
		}
		r = berth(t, getenv, nil, "whoami")
		if r.err == nil || !strings.Contains(r.err.Error(), "berth login") {
			t.Errorf("whoami after logout: %v, want an error pointing at berth login", r.err)
		}
		if r = berth(t, getenv, nil, "logout"); r.err != nil || !strings.Contains(r.stdout, "not logged in") {
			t.Errorf("second logout: %v %q", r.err, r.stdout)
		}
	})
}

func TestLoginRefusesBadCredentials(t *testing.T) {
	isolateHome(t)
	url, e := startServer(t)
	tok, _ := e.Token(t, "alice")
	getenv := envMap()
	path := filepath.Join(t.TempDir(), "config.json")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + ln.Addr().String()
	ln.Close()

	badToken := "bst_not-a-real-token-0123456789"
	for _, tc := range []struct {
		name, url, token, want string
	}{
		{"wrong token", url, badToken, "refused the token"},
		{"not berth", url + "/nope", tok, "does not look like a berth server"},
		{"unreachable", deadURL, tok, "cannot reach berth"},
		{"bad url", "ftp://example.com", tok, "want http:// or https://"},
		{"token with spaces", url, "a b", "whitespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := berth(t, getenv, nil, "login", "--url", tc.url, "--token", tc.token, "--config", path)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("login: %v, want an error containing %q", r.err, tc.want)
			}
			if strings.Contains(r.err.Error()+r.stdout+r.stderr, tc.token) {
				t.Errorf("the token appears in the output: %v", r.err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("a refused login wrote the config: %v", err)
			}
		})
	}
	if r := berth(t, getenv, strings.NewReader(""), "login", "--url", url, "--token", "-", "--config", path); r.err == nil || !strings.Contains(r.err.Error(), "stdin held no token") {
		t.Errorf("login --token - with empty stdin: %v", r.err)
	}
}
