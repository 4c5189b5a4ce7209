//go:build linux

package local_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestAttacks makes every attack of runtimetest on a berth whose local
// runtime confines sandboxes fully, with small limits so the limit
// attacks are quick. Its data directory sits under a 0700 parent, as
// `mktemp -d` makes, which once made berth drop the user namespace.
func TestAttacks(t *testing.T) { attacks(t, nil) }

// TestAttacksInImage makes the same attacks from sandboxes whose root
// filesystem is an OCI image (served by a registry on loopback) rather
// than the host system.
func TestAttacksInImage(t *testing.T) { attacks(t, imagetest.NewRegistry(t)) }

// attacks runs the attacks from sandboxes of the host system, or of the
// tools image in reg when there is one.
func attacks(t *testing.T, reg *imagetest.Registry) {
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(parent, "data")
	keyFile := filepath.Join(dataDir, "hmac.key")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, orchtest.ServerKey, 0o600); err != nil {
		t.Fatal(err)
	}
	rootOnly := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(rootOnly, []byte("root-only-"+randomHex(t)), 0o600); err != nil {
		t.Fatal(err)
	}

	// A pipe without close-on-exec, as a parent of berth's may leave it:
	// no sandbox process may hold it.
	var leak [2]int
	if err := syscall.Pipe(leak[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(leak[0]); syscall.Close(leak[1]) })

	lim := local.Limits{MemoryBytes: 256 << 20, Pids: 128, DiskBytes: 64 << 20, TmpBytes: 32 << 20}
	dbURL := storetest.URL(t)
	st := storetest.Open(t, dbURL)
	opts := local.Options{DataDir: dataDir, AgentBinary: agentBin, Limits: lim, Logger: orchtest.Logger(t)}
	image := "base"
	if reg != nil {
		opts.PlainHTTPRegistries = []string{reg.Host}
		image = toolsImage(t, reg)
	}
	rt := orchtest.NewRuntimeWith(t, opts)
	svc, err := orchestrator.New(st, rt, orchtest.Config(orchestrator.Config{Logger: orchtest.Logger(t), ReadyTimeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	orchtest.Run(t, svc)
	url := orchtest.Serve(t, func(string) http.Handler {
		return api.NewServer(svc, api.Options{Auth: auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth"}})
	})
	runtimetest.Attacks(t, &runtimetest.Berth{
		Svc: svc, Runtime: rt, Image: image, WritableRoot: reg != nil, URL: url, DatabaseAddr: "127.0.0.1:5432",
		Secrets:     []string{string(orchtest.ServerKey), dbURL},
		SecretFiles: []string{keyFile, rootOnly},
		MemoryBytes: lim.MemoryBytes, DiskBytes: lim.DiskBytes, TmpBytes: lim.TmpBytes, Pids: lim.Pids,
		MaxOutputBytes: orchestrator.DefaultMaxOutputBytes,
		HostProcesses:  processesOf,
	})
}

// processesOf lists the host processes whose real, effective or saved
// uid is in [first, first+n).
func processesOf(first, n int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				for _, f := range strings.Fields(rest) {
					if id, err := strconv.Atoi(f); err == nil && id >= first && id < first+n {
						out = append(out, pid)
						break
					}
				}
			}
		}
	}
	return out, nil
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
