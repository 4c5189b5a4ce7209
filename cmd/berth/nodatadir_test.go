package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsNeedAnExistingBerth runs the real binary from an empty
// directory, as an operator who is not where `berth serve` ran would:
// every command that needs an existing berth says there is none there,
// names the directory it looked in and how to point at the right one,
// exits non-zero, and creates nothing (no new empty database whose token
// the running server would refuse).
func TestCommandsNeedAnExistingBerth(t *testing.T) {
	berthBin := buildBerth(t)
	for _, args := range [][]string{
		{"token", "create", "--user", "alice"},
		{"token", "list"},
		{"token", "revoke", "tok_x"},
		{"user", "list"},
		{"user", "grant", "--user", "bob", "--role", "member"},
		{"migrate"},
		{"token", "create", "--user", "alice", "--data-dir", "elsewhere"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			// Reachable by the embedded database's account, so nothing but
			// the missing berth can stop the command.
			dir := embeddedDataDir(t)
			cmd := exec.Command(berthBin, args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exited with %v, want non-zero; stdout %q stderr %q", err, stdout.String(), stderr.String())
			}
			want := filepath.Join(dir, ".berth")
			if i := len(args) - 1; i > 0 && args[i-1] == "--data-dir" {
				want = filepath.Join(dir, args[i])
			}
			for _, s := range []string{"no berth data directory at " + want + " ", "berth serve --data-dir", "--database-url"} {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q does not say %q", stderr.String(), s)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q on stdout, want nothing", stdout.String())
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("created %v in the directory it ran from", left)
			}
		})
	}
}
