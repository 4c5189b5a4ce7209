package egresstest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The repository git.test serves as /demo.git: a README and a test
// script whose output is GitTestOutput.
const (
	GitRepo        = "demo.git"
	GitTestScript  = "test.sh"
	GitTestOutput  = "tests passed\n"
	gitReadme      = "# demo\n\nA repository served by berth's test internet.\n"
	gitTestContent = "#!/bin/sh\necho \"tests passed\"\n"
)

// gitEnv keeps the user's and the system's git configuration, and the
// clock, out of the repository made.
func gitEnv() []string {
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=berth tests", "GIT_AUTHOR_EMAIL=tests@berth.test",
		"GIT_COMMITTER_NAME=berth tests", "GIT_COMMITTER_EMAIL=tests@berth.test",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
	for _, kv := range os.Environ() {
		// A test run from a git hook has GIT_DIR and the like set for
		// another repository.
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

func git(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeGitRepo makes root/demo.git, a bare repository with one commit on
// main.
func makeGitRepo(ctx context.Context, root string) error {
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fmt.Errorf("make git work tree: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte(gitReadme), 0o644); err != nil {
		return fmt.Errorf("write README: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, GitTestScript), []byte(gitTestContent), 0o755); err != nil {
		return fmt.Errorf("write test script: %w", err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "README.md", GitTestScript},
		{"commit", "-q", "-m", "demo: a README and a test"},
		{"clone", "-q", "--bare", ".", filepath.Join(root, "repos", GitRepo)},
	} {
		if err := git(ctx, work, args...); err != nil {
			return err
		}
	}
	return os.RemoveAll(work)
}

// gitHandler serves the repositories under root/repos over git's smart
// HTTP protocol, read only, through git http-backend, whose complaints go
// to stderr.
func gitHandler(ctx context.Context, root string, stderr io.Writer) (http.Handler, error) {
	out, err := exec.CommandContext(ctx, "git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("find git's programs: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git http-backend: %w", err)
	}
	return &cgi.Handler{
		Path:   backend,
		Root:   "/",
		Stderr: stderr,
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Join(root, "repos"),
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
		},
	}, nil
}
