package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestDatabaseURLSources runs `berth migrate` against a real database with
// the URL given each way it can be: in the environment, in a private file
// (by flag or by environment), and on the command line, which works but
// warns that other processes can read it; and with the file forms' bad
// inputs, which are refused naming what is wrong.
func TestDatabaseURLSources(t *testing.T) {
	url := storetest.URL(t)
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	private := file("db-url", url+"\n", 0o600)
	readable := file("db-url-readable", url+"\n", 0o644)
	groupWritable := file("db-url-group", url+"\n", 0o620)
	empty := file("db-url-empty", "\n", 0o600)
	twoLines := file("db-url-two", url+"\n"+url+"\n", 0o400)

	const warning = "visible to every process"
	cases := []struct {
		name  string
		env   []string
		args  []string
		fails []string // words of the error; none = it works
		warns bool
	}{
		{"environment", []string{"BERTH_DATABASE_URL", url}, nil, nil, false},
		{"file", nil, []string{"--database-url-file", private}, nil, false},
		{"file from the environment", []string{"BERTH_DATABASE_URL_FILE", private}, nil, nil, false},
		{"command line", nil, []string{"--database-url", url}, nil, true},
		{"file readable by others", nil, []string{"--database-url-file", readable}, []string{readable, "0644", "chmod 600"}, false},
		{"file writable by the group", nil, []string{"--database-url-file", groupWritable}, []string{"0620", "chmod 600"}, false},
		{"empty file", nil, []string{"--database-url-file", empty}, []string{empty, "is empty"}, false},
		{"two lines", nil, []string{"--database-url-file", twoLines}, []string{"more than one line"}, false},
		{"missing file", nil, []string{"--database-url-file", filepath.Join(dir, "nope")}, []string{"--database-url-file", "no such file"}, false},
		{"URL and file", []string{"BERTH_DATABASE_URL", url}, []string{"--database-url-file", private}, []string{"--database-url", "--database-url-file", "give one"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := berth(t, envMap(c.env...), nil, append([]string{"migrate", "--data-dir", t.TempDir()}, c.args...)...)
			if len(c.fails) == 0 {
				if r.err != nil || !strings.Contains(r.stderr, "migrations applied") {
					t.Fatalf("migrate: %v\n%s", r.err, r.stderr)
				}
			} else {
				if r.err == nil {
					t.Fatalf("migrate worked, want an error naming %q", c.fails)
				}
				for _, w := range c.fails {
					if !strings.Contains(r.err.Error(), w) {
						t.Errorf("error %q does not name %q", r.err, w)
					}
				}
				if strings.Contains(r.err.Error(), url) {
					t.Errorf("the error shows the URL: %v", r.err)
				}
			}
			if got := strings.Contains(r.stderr, warning); got != c.warns {
				t.Errorf("warning shown = %v, want %v:\n%s", got, c.warns, r.stderr)
			}
		})
	}
}
