package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

var (
	agentBin string
	// goToolEnv keeps the go command's caches where they were before
	// tests moved HOME, so building berth in a test reuses them.
	goToolEnv []string
)

func TestMain(m *testing.M) {
	bin, cleanup, err := orchtest.BuildAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = bin
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env:", err)
		os.Exit(1)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		if i < len(vals) && vals[i] != "" {
			goToolEnv = append(goToolEnv, name+"="+vals[i])
		}
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// startServer runs a real orchestrator behind the REST API with /mcp
// mounted, wired as `berth serve` wires them, on a loopback port.
func startServer(t *testing.T) (string, *orchtest.Env) {
	t.Helper()
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	return runtimetest.Serve(t, e.Svc), e
}

// isolateHome points the user config dir into a temporary directory so
// no test reads or writes the real one.
func isolateHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home+"/.config")
	return home
}

// envMap is a getenv over a fixed set of variables, so BERTH_* of the
// machine running the tests cannot leak in.
func envMap(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

type result struct {
	stdout, stderr string
	err            error
}

// berth runs the CLI in-process.
func berth(t *testing.T, getenv func(string) string, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), args, getenv, stdin, &out, &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}
