package kube_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/wire"
)

// counting counts the requests a client sends to the API server.
type counting struct {
	n    *atomic.Int64
	next http.RoundTripper
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// BenchmarkStartServer measures start_server on the Kubernetes runtime
// against a real API server: berth's orchestration overhead (the call's
// time minus the stand-in kubelet's, from seeing the pod to reporting it
// ready) and the API requests one start makes.
func BenchmarkStartServer(b *testing.B) {
	var requests atomic.Int64
	rt, ns := newRuntimeB(b, &requests)
	e := orchtest.NewOn(b, rt, orchestrator.Config{DefaultNamespace: ns})
	_, p := e.Token(b, "bench")
	ctx := context.Background()
	c, err := e.Svc.RegisterClient(ctx, p, orchestrator.RegisterClientRequest{Name: "bench", Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	var overheads []time.Duration
	before := requests.Load()
	for b.Loop() {
		began := time.Now()
		op, err := e.Svc.StartServer(ctx, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: sandboxImage, WaitSeconds: 120})
		took := time.Since(began)
		if err != nil || op.Status != orchestrator.OpSucceeded {
			b.Fatalf("start: %+v %v", op, err)
		}
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, op.ServerID, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if tm, ok := env.Kubelet.Timing(pod.UID); ok && !tm.Ready.IsZero() {
			overheads = append(overheads, took-tm.Ready.Sub(tm.Seen))
		}
		if _, err := e.Svc.StopServer(ctx, p, orchestrator.ServerRef{ServerID: op.ServerID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "api-requests/start+stop")
	if len(overheads) > 0 {
		slices.Sort(overheads)
		b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds())/1000, "overhead-p50-ms")
	}
}

// BenchmarkWarmClaimToExec measures a start that takes a warm pod, to the
// end of the first command in it.
func BenchmarkWarmClaimToExec(b *testing.B) {
	var requests atomic.Int64
	rt, ns := newRuntimeB(b, &requests)
	e := orchtest.NewOn(b, rt, orchestrator.Config{DefaultNamespace: ns, WarmPool: map[string]int{sandboxImage: 2}, WatchInterval: 100 * time.Millisecond})
	_, p := e.Token(b, "bench")
	ctx := context.Background()
	c, err := e.Svc.RegisterClient(ctx, p, orchestrator.RegisterClientRequest{Name: "bench", Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		waitWarmReady(b, e, 2)
		b.StartTimer()
		began := time.Now()
		op, err := e.Svc.StartServer(ctx, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: sandboxImage, WaitSeconds: 120})
		if err != nil || op.Status != orchestrator.OpSucceeded {
			b.Fatalf("start: %+v %v", op, err)
		}
		if _, err := e.Svc.SessionExec(ctx, p, op.ServerID, "s", wire.SessionExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(began))
		b.StopTimer()
		e.Svc.StopServer(ctx, p, orchestrator.ServerRef{ServerID: op.ServerID})
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "claim-to-exec-p50-ms")
}

func waitWarmReady(b *testing.B, e *orchtest.Env, n int) {
	b.Helper()
	end := time.Now().Add(deadline)
	for {
		var have int
		if err := e.Store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM servers WHERE warm AND status = 'RUNNING'`).Scan(&have); err != nil {
			b.Fatal(err)
		}
		if have >= n {
			return
		}
		if time.Now().After(end) {
			b.Fatalf("%d of %d warm servers ready", have, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newRuntimeB is newRuntime for benchmarks, counting API requests.
func newRuntimeB(b *testing.B, requests *atomic.Int64) (*kube.Runtime, string) {
	b.Helper()
	ns := env.Namespace(b, "bench")
	applyShippedRBAC(b, ns)
	cfg := env.ConfigFor(b, ns, "berth")
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return counting{n: requests, next: next} })
	rt, err := kube.New(context.Background(), kube.Options{Config: cfg, Namespaces: []string{ns}, AgentImage: agentImage})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return rt, ns
}
