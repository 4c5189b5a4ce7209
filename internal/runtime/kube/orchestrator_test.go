package kube_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// berth is an orchestrator on the Kubernetes runtime with a user.
type berth struct {
	svc *orchestrator.Service
	ns  string
	p   rbac.Principal
}

func newBerth(t *testing.T, cfg orchestrator.Config) berth {
	t.Helper()
	rt, ns := newRuntime(t, kube.Options{})
	cfg.DefaultNamespace, cfg.Logger = ns, orchtest.Logger(t)
	e := orchtest.NewOn(t, rt, cfg)
	_, p := e.Token(t, "alice")
	return berth{svc: e.Svc, ns: ns, p: p}
}

func (b berth) client(t *testing.T) string {
	t.Helper()
	c, err := b.svc.RegisterClient(context.Background(), b.p, orchestrator.RegisterClientRequest{Name: "k", Namespace: b.ns})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func (b berth) start(t *testing.T, clientID, image string) orchestrator.Operation {
	t.Helper()
	op, err := b.svc.StartServer(context.Background(), b.p, orchestrator.StartServerRequest{ClientID: clientID, ImageTag: image, WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func serverOf(t *testing.T, op orchestrator.Operation) string {
	t.Helper()
	var res orchestrator.StartServerResult
	if op.Status != orchestrator.OpSucceeded || op.Result == nil || json.Unmarshal(op.Result, &res) != nil {
		t.Fatalf("start: %s %s", op.Status, op.Error)
	}
	return res.ServerID
}

// TestImagePullErrorFailsTheStart: a start whose image cannot be pulled
// fails with the reason, in seconds, not at the ready timeout.
func TestImagePullErrorFailsTheStart(t *testing.T) {
	b := newBerth(t, orchestrator.Config{ReadyTimeout: 10 * time.Minute})
	began := time.Now()
	op := b.start(t, b.client(t), missingImage)
	if op.Status != orchestrator.OpFailed || !strings.Contains(op.Error, "ErrImagePull") && !strings.Contains(op.Error, "ImagePullBackOff") {
		t.Fatalf("start with a missing image: %s %q", op.Status, op.Error)
	}
	t.Logf("failed after %s: %s", time.Since(began).Round(time.Millisecond), op.Error)
}

// TestPodDeletedMarksServerFailed: a pod deleted behind berth's back
// makes its server FAILED with that reason.
func TestPodDeletedMarksServerFailed(t *testing.T) {
	b := newBerth(t, orchestrator.Config{})
	id := serverOf(t, b.start(t, b.client(t), sandboxImage))
	if err := env.Client.CoreV1().Pods(b.ns).Delete(context.Background(), id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServer(t, b, id, func(s orchestrator.Server) bool {
		return s.Status == orchestrator.ServerFailed && strings.Contains(s.Error, "deleted")
	})
}

// TestReconcilesAfterACrash: a pod no database row knows (left by a berth
// that crashed between creating it and recording it) is deleted, and a
// running server whose pod vanished while no berth ran is marked failed.
func TestReconcilesAfterACrash(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx := context.Background()
	orphan := spec(ns, "0a0a0a0a-0000-4000-8000-000000000001")
	if err := rt.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	e := orchtest.NewOn(t, rt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	_, p := e.Token(t, "alice")
	b := berth{svc: e.Svc, ns: ns, p: p}
	id := serverOf(t, b.start(t, b.client(t), sandboxImage))
	// The sandbox vanishes with nobody watching: a second runtime sees
	// only the end state, as a restarted berth would.
	rt.Close()
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, id)
	rt2, err := kube.New(ctx, kube.Options{Config: env.ConfigFor(t, ns, "berth"), Namespaces: []string{ns}, AgentImage: agentImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt2.Close() })
	svc2, err := orchestrator.New(e.Store, rt2, orchtest.Config(orchestrator.Config{DefaultNamespace: ns}))
	if err != nil {
		t.Fatal(err)
	}
	svc2.WatchOnce(ctx)
	waitGone(t, ns, orphan.ServerID)
	srv, err := svc2.GetServer(ctx, p, id)
	if err != nil || srv.Status != orchestrator.ServerFailed {
		t.Fatalf("server whose pod vanished: %+v %v", srv, err)
	}
}

// TestWarmClaimRace: two replicas start servers from a warm pool of one
// at once; exactly one gets the warm pod, and its labels name its new
// client and owner.
func TestWarmClaimRace(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	url := storetest.URL(t)
	cfg := orchestrator.Config{DefaultNamespace: ns, WarmPool: map[string]int{sandboxImage: 1}, Logger: orchtest.Logger(t)}
	var svcs []*orchestrator.Service
	for i := range 2 {
		st := storetest.Open(t, url)
		rti := rt
		if i == 1 {
			r2, err := kube.New(context.Background(), kube.Options{Config: env.ConfigFor(t, ns, "berth"), Namespaces: []string{ns}, AgentImage: agentImage})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r2.Close() })
			rti = r2
		}
		c := cfg
		c.ReplicaID = []string{"a", "b"}[i]
		svc, err := orchestrator.New(st, rti, orchtest.Config(c))
		if err != nil {
			t.Fatal(err)
		}
		orchtest.Run(t, svc)
		svcs = append(svcs, svc)
	}
	ctx := context.Background()
	tok, _, err := svcs[0].CreateToken(ctx, orchestrator.CreateTokenRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warm pod", func() bool {
		ids, _ := rt.List(ctx)
		for _, id := range ids {
			if st, _ := rt.Status(ctx, id); st.State == runtime.StateReady {
				return true
			}
		}
		return false
	})
	var wg sync.WaitGroup
	results := make([]orchestrator.StartServerResult, 2)
	for i, svc := range svcs {
		wg.Go(func() {
			p, err := svc.Authenticate(ctx, tok)
			if err != nil {
				t.Error(err)
				return
			}
			c, err := svc.RegisterClient(ctx, p, orchestrator.RegisterClientRequest{Name: "race", Namespace: ns})
			if err != nil {
				t.Error(err)
				return
			}
			op, err := svc.StartServer(ctx, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: sandboxImage, WaitSeconds: deadline.Seconds()})
			if err != nil || op.Status != orchestrator.OpSucceeded {
				t.Errorf("start: %+v %v", op, err)
				return
			}
			json.Unmarshal(op.Result, &results[i])
		})
	}
	wg.Wait()
	if results[0].ServerID == results[1].ServerID || results[0].Warm == results[1].Warm {
		t.Fatalf("two starts over a warm pool of one: %+v and %+v, want one warm and one cold server", results[0], results[1])
	}
	warm := results[0]
	if results[1].Warm {
		warm = results[1]
	}
	waitFor(t, "the claimed warm pod's labels", func() bool {
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, warm.ServerID, metav1.GetOptions{})
		return err == nil && pod.Labels["berth.dev/client"] == warm.ClientID && pod.Labels["berth.dev/owner"] == warm.Server.OwnerID
	})
}

func waitServer(t *testing.T, b berth, id string, cond func(orchestrator.Server) bool) {
	t.Helper()
	waitFor(t, "server "+id, func() bool {
		s, err := b.svc.GetServer(context.Background(), b.p, id)
		return err == nil && cond(s.Server)
	})
}

func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, "pod "+name+" to be gone", func() bool {
		_, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err != nil
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeHoldsFollowClients: registering a client with nodes_count
// holds its nodes and reports them; stopping it releases them; a hold
// left for a client the database does not know (a crash between holding
// and recording) is released by the watcher.
func TestNodeHoldsFollowClients(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	e := orchtest.NewOn(t, rt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	_, p := e.Token(t, "alice")
	ctx := context.Background()
	c, err := e.Svc.RegisterClient(ctx, p, orchestrator.RegisterClientRequest{Name: "n", Namespace: ns, NodesCount: 2})
	if err != nil || c.NodesHeld == nil || c.Notice != "" {
		t.Fatalf("register with nodes_count: %+v %v", c, err)
	}
	waitFor(t, "two held nodes", func() bool {
		got, err := e.Svc.GetClient(ctx, p, c.ID)
		return err == nil && got.NodesHeld != nil && *got.NodesHeld == 2
	})
	if _, err := e.Svc.StopClient(ctx, p, c.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := rt.HeldNodes(ctx, ns, c.ID); err != nil || n != 0 {
		t.Fatalf("after stop_client %d nodes are held (%v)", n, err)
	}
	if err := rt.HoldNodes(ctx, ns, "ffffffff-0000-4000-8000-00000000dead", 1); err != nil {
		t.Fatal(err)
	}
	e.Svc.WatchOnce(ctx)
	holds, err := rt.Holders(ctx)
	if err != nil || len(holds) != 0 {
		t.Fatalf("holds after the watcher: %+v %v", holds, err)
	}
}
