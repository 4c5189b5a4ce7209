package runtimetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// attackLimits fills the workspace, /tmp and /dev/shm past their sizes,
// forks past the process limit and allocates past the memory limit: each
// fails inside the sandbox, and the sandbox goes on working. Where the
// runtime evicts a sandbox past its disk sizes (DiskLimitEvicts), each
// of the workspace and /tmp gets a sandbox of its own, which must end
// FAILED with the reason. Item 10.
func attackLimits(t *testing.T, b *Berth) {
	sb := b.user(t, "hog").start(t, orchestrator.StartServerRequest{})
	shm := b.ShmBytes
	if shm == 0 {
		shm = b.TmpBytes
	}
	sizes := map[string]int64{"/workspace": b.DiskBytes, "/tmp": b.TmpBytes, "/dev/shm": shm}
	if b.DiskLimitEvicts {
		for _, dir := range []string{"/workspace", "/tmp"} {
			evictedPast(t, b, dir, sizes[dir])
			delete(sizes, dir)
		}
	}
	for dir, size := range sizes {
		res := sb.sh(t, fmt.Sprintf("dd if=/dev/zero of=%s/fill bs=1M count=%d 2>&1; rm -f %s/fill", dir, size>>20+16, dir))
		if !strings.Contains(res.Stdout, "No space left on device") {
			t.Fatalf("writing %d MiB more than %s holds: %s", 16, dir, res.Stdout)
		}
	}
	forks := sb.sh(t, fmt.Sprintf(`python3 -c '
import os, time
n = 0
try:
    for i in range(%d):
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("refused after", n)
'; pkill -KILL sleep; pkill -KILL -f time.sleep; true`, b.Pids+64))
	if !strings.Contains(forks.Stdout, "refused after") {
		t.Fatalf("%d forks all succeeded under a limit of %d processes: %s", b.Pids+64, b.Pids, forks.Stdout)
	}
	mem := sb.sh(t, fmt.Sprintf(`python3 -c 'b = bytearray(%d); b[::4096] = b"x" * len(b[::4096]); print("allocated")'; echo "exit $?"`, b.MemoryBytes+64<<20))
	if strings.Contains(mem.Stdout, "allocated") {
		t.Fatalf("allocated %d bytes under a limit of %d", b.MemoryBytes+64<<20, b.MemoryBytes)
	}
	if got := sb.ok(t, "echo still-here"); got != "still-here\n" {
		t.Fatalf("after the limits the sandbox answers %q", got)
	}
}

// evictedPast writes 16 MiB past a folder's size in a sandbox of its
// own: the sandbox must be stopped and its server FAILED, saying what
// was exceeded.
func evictedPast(t *testing.T, b *Berth, dir string, size int64) {
	t.Helper()
	sb := b.user(t, "filler").start(t, orchestrator.StartServerRequest{})
	// The write may outlive its sandbox: run it detached, then wait.
	sb.ok(t, fmt.Sprintf("setsid dd if=/dev/zero of=%s/fill bs=1M count=%d >/dev/null 2>&1 </dev/null & disown -a; true", dir, size>>20+16))
	var srv orchestrator.Server
	waitFor(t, "the sandbox that filled "+dir+" to be stopped", func() bool {
		srv = sb.server(t)
		return srv.Status == orchestrator.ServerFailed
	})
	if !strings.Contains(srv.Error, "exceeds") {
		t.Fatalf("the server that filled %s failed saying %q, not what it exceeded", dir, srv.Error)
	}
}

// attackOutputFlood prints 100 MB with no output limit asked for (null):
// berth keeps at most its own cap of it, however the sandbox floods.
// Item 5.
func attackOutputFlood(t *testing.T, b *Berth) {
	sb := b.user(t, "flooder").start(t, orchestrator.StartServerRequest{})
	op, err := sb.oneShot(orchestrator.RunBashRequest{Command: "head -c 100000000 /dev/zero | tr '\\0' a", MaxOutputBytes: wire.Null()})
	if err != nil {
		t.Fatalf("flood: %v", err)
	}
	var res wire.BashResult
	bashResult(t, op, &res)
	if int64(len(res.Stdout)) > 2*b.MaxOutputBytes || res.StdoutTruncatedBytes < 100000000-2*b.MaxOutputBytes {
		t.Fatalf("of 100 MB printed berth kept %d bytes (%d truncated); its cap is %d", len(res.Stdout), res.StdoutTruncatedBytes, b.MaxOutputBytes)
	}
	if stored := op.IdeGYM("").Result; stored != nil && int64(len(*stored)) > 4*b.MaxOutputBytes {
		t.Fatalf("the stored result of the flood is %d bytes", len(*stored))
	}
}

// attackUsers runs commands as other users of the sandbox, which needs
// its user namespace to map them; an unknown user is refused at the call
// or as a failed operation, never a success. Where a sandbox has one
// user only (OneUser), every other user is refused so. Item 15.
func attackUsers(t *testing.T, b *Berth) {
	sb := b.user(t, "switcher").start(t, orchestrator.StartServerRequest{})
	op, err := sb.oneShot(orchestrator.RunBashRequest{Command: "id -un; touch /tmp/mine && stat -c %U /tmp/mine", User: "nobody"})
	switch {
	case b.OneUser:
		if err == nil && op.Status == orchestrator.OpSucceeded {
			t.Fatalf("a command as nobody ran in a sandbox of one user: %s", op.Result)
		}
	case err != nil:
		t.Fatalf("run as nobody: %v", err)
	default:
		if got := bashOutput(t, op); got != "nobody\nnobody\n" {
			t.Fatalf("run as nobody printed %q", got)
		}
	}
	op, err = sb.oneShot(orchestrator.RunBashRequest{Command: "id", User: "no-such-user-here"})
	if err == nil && op.Status == orchestrator.OpSucceeded {
		t.Fatalf("a command as an unknown user succeeded: %s", op.Result)
	}
}

// bashOutput is the stdout of a successful run_bash_command operation.
func bashOutput(t *testing.T, op orchestrator.Operation) string {
	t.Helper()
	var res wire.BashResult
	bashResult(t, op, &res)
	return res.Stdout
}

// bashResult decodes a successful run_bash_command operation's result.
func bashResult(t *testing.T, op orchestrator.Operation, res *wire.BashResult) {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("operation %s is %s (%s)", op.ID, op.Status, op.Error)
	}
	if err := json.Unmarshal(op.Result, res); err != nil {
		t.Fatalf("result %.300s: %v", op.Result, err)
	}
}
