//go:build linux

package local_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/syncbuf"
)

// TestDiskFull runs runtimetest.DiskFull against a berth whose data
// directory is on a 400 MiB tmpfs the test mounts: room for the
// neighbour's 128 MiB volume and one of the attacker's above the 96 MiB
// reserve, where four 128 MiB sandboxes filling their volumes would take
// more than the host has.
func TestDiskFull(t *testing.T) {
	const fsSize, reserve = 400 << 20, 96 << 20
	fs := smallFilesystem(t, fsSize)
	dataDir := filepath.Join(fs, "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logged syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	lim := local.Limits{MemoryBytes: 256 << 20, Pids: 256, DiskBytes: 128 << 20, TmpBytes: 32 << 20}
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: dataDir, AgentBinary: agentBin, Limits: lim,
		Reserve: reserve, SpaceCheckInterval: 20 * time.Millisecond, Logger: log})
	st := storetest.Open(t, storetest.URL(t))
	svc, err := orchestrator.New(st, rt, orchtest.Config(orchestrator.Config{Logger: orchtest.Logger(t), ReadyTimeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	orchtest.Run(t, svc)
	url := orchtest.Serve(t, func(string) http.Handler {
		return api.NewServer(svc, api.Options{Auth: auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth"}})
	})
	m := metrics.New()
	m.WatchSpace(rt, nil)
	runtimetest.DiskFull(t, &runtimetest.Berth{Svc: svc, Runtime: rt, Image: "base", URL: url,
		MemoryBytes: lim.MemoryBytes, DiskBytes: lim.DiskBytes, TmpBytes: lim.TmpBytes, Pids: lim.Pids,
	}, runtimetest.HostDisk{
		Free:    func(t *testing.T) int64 { return freeBytes(t, fs) },
		Reserve: reserve,
		Fill: func(t *testing.T, leave int64) func() {
			filler := filepath.Join(fs, "filler")
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := unix.Fallocate(int(f.Fd()), 0, 0, freeBytes(t, fs)-leave); err != nil {
				t.Fatalf("fill the host filesystem: %v", err)
			}
			return func() { os.Remove(filler) }
		},
		Metrics: func(t *testing.T) string {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			return rec.Body.String()
		},
		Log: logged.String,
	})
	// Nothing gave any of the volumes' space back to the host (a discard
	// or a zeroing turned into a hole in the image) while they were used.
	images, _ := filepath.Glob(filepath.Join(dataDir, "servers", "*", "volume.img"))
	if len(images) < 2 {
		t.Fatalf("%d volume images at the end, want the neighbour's and the filler's", len(images))
	}
	for _, img := range images {
		var st unix.Stat_t
		if err := unix.Stat(img, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 < st.Size {
			t.Errorf("a volume image has %d of its %d bytes allocated on the host", st.Blocks*512, st.Size)
		}
	}
}

// smallFilesystem mounts a tmpfs of size bytes on a fresh directory
// until the test ends, after every sandbox on it is gone.
func smallFilesystem(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+itoa(size)+",mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	// Registered first, so it runs after the runtime's cleanup deleted
	// the sandboxes whose volumes live here.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
