package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/wire"
)

// imageCheck runs in a sandbox of each image: who it runs as, with which
// capabilities, whether its root, workspace, /tmp and the injected agent
// are what berth's pod promises. Only bash and what every image has
// (busybox's applets in the image without a C library).
const imageCheck = `echo "uid=$(id -u) gid=$(id -g)"
grep '^CapEff' /proc/self/status
grep '^NoNewPrivs' /proc/self/status
echo "pwd=$PWD home=$HOME"
touch /root-write 2>/dev/null && echo root=writable || echo root=read-only
echo w > /workspace/w && echo workspace=writable
echo t > /tmp/t && echo tmp=writable
echo a 2>/dev/null >/berth/planted && echo agent=writable || echo agent=read-only
[ -x /berth/berth-agent ] && echo agent=present
[ -e /lib64/ld-linux-x86-64.so.2 ] && echo libc=yes || echo libc=no`

// TestImages starts a sandbox from each kind of image on the real node
// and checks, from inside, that the agent was injected and runs, as the
// fixed non-root uid, with its workspace and /tmp writable and the rest
// read-only: a Debian image, one without a C library (the agent is
// static), one whose USER is not root (berth's uid wins).
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	if !onRealNode() {
		t.Skipf("real images need a real node; sandbox pods run on %s", nodeNote)
	}
	rt, ns := newNodeRuntime(t, kube.Options{})
	e := orchtest.NewOn(t, rt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	_, p := e.Token(t, "imager")
	ctx := context.Background()
	c, err := e.Svc.RegisterClient(ctx, p, orchestrator.RegisterClientRequest{Name: "images", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []struct {
		ref  string
		libc string
	}{
		{sandboxImage, "libc=yes"},
		{staticImage, "libc=no"},
		{nonrootImage, "libc=yes"},
	} {
		t.Run(img.ref, func(t *testing.T) {
			began := time.Now()
			op, err := e.Svc.StartServer(ctx, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: img.ref, WaitSeconds: deadline.Seconds()})
			if err != nil || op.Status != orchestrator.OpSucceeded {
				t.Fatalf("start from %s: %v %s %s", img.ref, err, op.Status, op.Error)
			}
			t.Logf("started from %s in %s", img.ref, time.Since(began).Round(time.Millisecond))
			defer e.Svc.StopServer(ctx, p, orchestrator.ServerRef{ServerID: op.ServerID})
			res, err := e.Svc.SessionExec(ctx, p, op.ServerID, "check", wire.SessionExecRequest{Command: imageCheck, Timeout: deadline.Seconds()})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"uid=65532 gid=65532", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "pwd=/workspace home=/workspace",
				"root=read-only", "workspace=writable", "tmp=writable", "agent=read-only", "agent=present", img.libc} {
				if !strings.Contains(res.Stdout, want+"\n") {
					t.Errorf("in a sandbox of %s: want %q in\n%s%s", img.ref, want, res.Stdout, res.Stderr)
				}
			}
		})
	}
}
