package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// HostDisk is the host filesystem a runtime keeps sandboxes' disk on
// (the local runtime's data directory), small enough for a test to fill,
// with what DiskFull needs to watch it.
type HostDisk struct {
	// Free is the filesystem's free space now.
	Free func(t *testing.T) int64
	// Reserve is what berth keeps free there.
	Reserve int64
	// Fill takes the filesystem down to leave bytes free, as something
	// else on the host would, until undo.
	Fill func(t *testing.T, leave int64) (undo func())
	// Metrics returns berth's metrics, in Prometheus's text format.
	Metrics func(t *testing.T) string
	// Log is what berth has logged so far.
	Log func() string
}

// DiskFull attacks the host's disk from sandboxes whose volumes together
// are larger than it. The host filesystem d is small; b's sandboxes each
// take DiskBytes. Another user's sandbox starts first; the attacker then
// starts sandboxes until berth refuses one, with an error naming the
// sizes, because its volume cannot be allocated above the reserve; every
// sandbox it got fills its volume: the command fails with ENOSPC, what it
// wrote reads back whole from the disk, the host keeps its reserve, and
// the other user's sandbox still writes files. Then the host itself falls
// below the reserve: /readyz, the metrics and the log say so and new
// sandboxes are refused until it recovers. Issue 18, item 1.
func DiskFull(t *testing.T, b *Berth, d HostDisk) {
	neighbour := b.user(t, "neighbour").start(t, orchestrator.StartServerRequest{})
	writeFile(t, neighbour, "before.txt", "written before the attack\n")

	attacker := b.user(t, "filler")
	var filling []sandbox
	refused := ""
	for i := range 4 {
		sb, op, err := attacker.tryStart(t, orchestrator.StartServerRequest{ServerName: fmt.Sprint("fill-", i)})
		if err == nil && op.Status == orchestrator.OpSucceeded {
			filling = append(filling, sb)
			continue
		}
		refused = op.Error
		if err != nil {
			refused = err.Error()
		}
		break
	}
	if len(filling) == 0 {
		t.Fatalf("no sandbox could start on a host with room for one: %s", refused)
	}
	if refused == "" {
		t.Fatalf("%d sandboxes of %s started on a host with room for fewer: their volumes are not allocated", len(filling), runtime.FormatBytes(b.DiskBytes))
	}
	for _, want := range []string{"not enough disk space", runtime.FormatBytes(b.DiskBytes) + " workspace volume", runtime.FormatBytes(d.Reserve), "reserve"} {
		if !strings.Contains(refused, want) {
			t.Fatalf("the refused start says %q, want it to name %q", refused, want)
		}
	}

	for _, sb := range filling {
		// A pattern, so data the disk lost (read back as zeros) shows.
		res := sb.sh(t, "yes 0123456789abcdef | dd of=/workspace/big bs=1M count=300 iflag=fullblock conv=fsync 2>&1; echo exit=$?")
		if !strings.Contains(res.Stdout, "No space left on device") || strings.Contains(res.Stdout, "exit=0") {
			t.Fatalf("filling a %s volume with 300 MiB: %s; want ENOSPC and a failed command", runtime.FormatBytes(b.DiskBytes), res.Stdout)
		}
		// O_DIRECT reads what the disk holds, not what the page cache
		// kept of a write the disk lost.
		back := sb.ok(t, "dd if=/workspace/big iflag=direct bs=1M 2>/dev/null | tr -d '0123456789abcdef\\n' | wc -c; stat -c %s /workspace/big")
		if lines := strings.Fields(back); len(lines) != 2 || lines[0] != "0" {
			t.Fatalf("reading back what dd wrote (bytes not of its pattern, size): %q", back)
		}
		if free := d.Free(t); free < d.Reserve {
			t.Fatalf("after a sandbox filled its volume the host has %s free, less than berth's %s reserve", runtime.FormatBytes(free), runtime.FormatBytes(d.Reserve))
		}
		if got := sb.ok(t, "rm /workspace/big; echo alive"); got != "alive\n" {
			t.Fatalf("the filler after its fill: %q", got)
		}
	}
	writeFile(t, neighbour, "after.txt", strings.Repeat("n", 1<<20))
	if got := neighbour.ok(t, "cat before.txt; stat -c %s after.txt"); got != "written before the attack\n1048576\n" {
		t.Fatalf("the neighbour's files after the attack: %q", got)
	}

	// The host falls below the reserve, by something else than berth.
	undo := d.Fill(t, d.Reserve/2)
	ready := readyDisk(t, b)
	if !ready.Low || !strings.Contains(ready.Message, "reserve") {
		t.Fatalf("/readyz with the host below the reserve: %+v", ready)
	}
	_, op, err := b.user(t, "latecomer").tryStart(t, orchestrator.StartServerRequest{})
	if err == nil && op.Status == orchestrator.OpSucceeded {
		t.Fatal("a sandbox started below the reserve")
	}
	if msg := op.Error + fmt.Sprint(err); !strings.Contains(msg, "reserve") {
		t.Fatalf("the start below the reserve failed with %q, want the reserve named", msg)
	}
	if m := d.Metrics(t); !strings.Contains(m, "\nberth_data_dir_low 1\n") || !strings.Contains(m, "\nberth_data_dir_free_bytes ") {
		t.Fatalf("metrics below the reserve:\n%s", grepLines(m, "berth_data_dir"))
	}
	waitFor(t, "the log to say the reserve is reached", func() bool { return strings.Contains(d.Log(), "below its reserve") })
	undo()
	if ready := readyDisk(t, b); ready.Low {
		t.Fatalf("/readyz once space is freed: %+v", ready)
	}
	waitFor(t, "the log to say the space recovered", func() bool { return strings.Contains(d.Log(), "above its reserve again") })
	if got := neighbour.ok(t, "echo still-here"); got != "still-here\n" {
		t.Fatalf("the neighbour at the end: %q", got)
	}
}

// writeFile writes a file through berth's write_file.
func writeFile(t *testing.T, s sandbox, path, content string) {
	t.Helper()
	_, err := s.u.b.Svc.WriteFile(context.Background(), s.u.p, orchestrator.WriteFileRequest{ServerID: s.id,
		WriteFileRequest: wire.WriteFileRequest{Path: path, Content: content}})
	if err != nil {
		t.Fatalf("write_file %s in %s: %v", path, s.id, err)
	}
}

// readyDiskState is the disk part of /readyz's answer.
type readyDiskState struct {
	FreeBytes    int64  `json:"free_bytes"`
	ReserveBytes int64  `json:"reserve_bytes"`
	Low          bool   `json:"low"`
	Message      string `json:"message"`
}

// readyDisk asks berth's /readyz, which needs no credential.
func readyDisk(t *testing.T, b *Berth) readyDiskState {
	t.Helper()
	resp, err := http.Get(b.URL + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var ready struct {
		Disk *readyDiskState `json:"disk"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ready) != nil || ready.Disk == nil {
		t.Fatalf("/readyz: %d %s; want 200 with the data directory's space", resp.StatusCode, raw)
	}
	return *ready.Disk
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
