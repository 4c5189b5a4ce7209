package cliconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "berth", "config.json")
	if _, err := Load(path); !errors.Is(err, ErrNotLoggedIn) {
		t.Fatalf("Load of nothing: %v, want ErrNotLoggedIn", err)
	}
	first := Config{URL: "https://one.example", Token: "bst_one"}
	if err := Save(path, first); err != nil {
		t.Fatal(err)
	}
	// A looser file left by something else is replaced by an owner-only one.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	second := Config{URL: "https://two.example/berth", Token: "bst_two"}
	if err := Save(path, second); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(path))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	got, err := Load(path)
	if err != nil || got != second {
		t.Fatalf("Load: %+v, %v; want the second config", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries next to the config, want none (temporary files must be renamed or removed)", len(entries)-1)
	}
	if removed, err := Remove(path); !removed || err != nil {
		t.Fatalf("Remove: %v %v", removed, err)
	}
	if removed, err := Remove(path); removed || err != nil {
		t.Fatalf("second Remove: %v %v, want false, nil", removed, err)
	}
}

func TestSaveRefusesIncompleteConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	for _, c := range []Config{{URL: "https://x.example"}, {Token: "t"}, {URL: "https://x.example", Token: "a\nb"}} {
		if err := Save(path, c); err == nil {
			t.Errorf("Save(%+v) succeeded", c.URL)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused Save left a file: %v", err)
	}
}

func TestLoadRejectsBrokenFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":  "not json",
		"no token": `{"url":"https://x.example"}`,
		"bad url":  `{"url":"x.example","token":"t"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "log in again") {
			t.Errorf("%s: Load: %v, want an error saying to log in again", name, err)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://berth.example.com/":   "https://berth.example.com",
		" http://127.0.0.1:8080 ":      "http://127.0.0.1:8080",
		"https://example.com/berth//":  "https://example.com/berth",
		"":                             "error: empty",
		"berth.example.com":            "error: want http",
		"ftp://example.com":            "error: want http",
		"https://":                     "error: no host",
		"https://u:secret@example.com": "error: no user info",
		"https://example.com/?a=b":     "error: no user info",
		"https://u:secret@[::1":        "error: not a valid URL",
	} {
		got, err := NormalizeURL(in)
		if strings.HasPrefix(want, "error: ") {
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(want, "error: ")) {
				t.Errorf("NormalizeURL(%q) = %q, %v; want an error containing %q", in, got, err, strings.TrimPrefix(want, "error: "))
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("NormalizeURL(%q) error shows the password: %v", in, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestOAuthLoginRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	want := Config{URL: "https://b.example", Token: "berth_at_x", OAuth: &OAuth{
		Issuer: "https://b.example", ClientID: "berth_client_1", TokenEndpoint: "https://b.example/oauth/token",
		RefreshToken: "berth_rt_y", ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || got.OAuth == nil || *got.OAuth != *want.OAuth || got.Token != want.Token {
		t.Fatalf("Load: %+v %v, want %+v", got.OAuth, err, want.OAuth)
	}
	bad := want
	bad.OAuth = &OAuth{RefreshToken: "r"}
	if err := Save(path, bad); err == nil {
		t.Error("saved an OAuth login without client id or token endpoint")
	}
}
