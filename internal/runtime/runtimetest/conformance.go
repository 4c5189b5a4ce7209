package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Target is a runtime under the conformance tests.
type Target struct {
	// Runtime is the runtime; its sandboxes are the tests' own.
	Runtime runtime.Runtime
	// Image is an image tag sandboxes start from.
	Image string
	// Namespace is where sandboxes go (default "default").
	Namespace string
	// Failing is a sandbox that cannot start on this runtime, and
	// FailingReason a word its failure must name (the reason a user
	// needs, such as an image that cannot be pulled or a memory limit).
	Failing       runtime.Spec
	FailingReason string
	// Client reaches a sandbox's agent at its endpoint; nil dials the
	// endpoint's network and address directly.
	Client func(runtime.Endpoint) *http.Client
}

// conformanceToken is the agent token of the conformance sandboxes.
const conformanceToken = "conformance-token-conformance-token-0123"

// Conformance runs the tests every runtime must pass: what the
// orchestrator relies on, through the runtime interface alone.
func Conformance(t *testing.T, tg Target) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Target)
	}{
		{"create is idempotent and the agent answers", conformCreate},
		{"a missing sandbox is gone", conformMissing},
		{"delete removes everything and is idempotent", conformDelete},
		{"logs are the agent's", conformLogs},
		{"list names every sandbox", conformList},
		{"a sandbox that cannot start fails with its reason", conformFailing},
		{"bad ids are refused", conformBadIDs},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, tg) })
	}
}

// idSeq returns a fresh sandbox id.
func idSeq() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "conform-" + hex.EncodeToString(b)
}

func (tg Target) spec(id string) runtime.Spec {
	return runtime.Spec{ServerID: id, Namespace: tg.namespace(), ClientID: "conformance", OwnerID: "conformance", ImageTag: tg.Image, AgentToken: conformanceToken}
}

func (tg Target) namespace() string {
	if tg.Namespace == "" {
		return "default"
	}
	return tg.Namespace
}

// create creates a sandbox, deleting it when the test ends, and waits
// until its agent answers.
func (tg Target) create(t *testing.T, spec runtime.Spec) runtime.Endpoint {
	t.Helper()
	ctx := context.Background()
	if err := tg.Runtime.Create(ctx, spec); err != nil {
		t.Fatalf("create %s: %v", spec.ServerID, err)
	}
	t.Cleanup(func() { tg.Runtime.Delete(context.Background(), spec.ServerID) })
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	ep, err := tg.Runtime.WaitReady(wctx, spec.ServerID)
	if err != nil {
		t.Fatalf("wait for %s: %v", spec.ServerID, err)
	}
	return ep
}

func (tg Target) client(ep runtime.Endpoint) *http.Client {
	if tg.Client != nil {
		return tg.Client(ep)
	}
	return &http.Client{Timeout: deadline, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, ep.Network, ep.Address)
	}}}
}

// health calls the agent's health endpoint, with its token.
func (tg Target) health(ep runtime.Endpoint) error {
	req, _ := http.NewRequest(http.MethodGet, "http://agent/api/capabilities", nil)
	req.Header.Set("Authorization", "Bearer "+conformanceToken)
	resp, err := tg.client(ep).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("capabilities answered %d", resp.StatusCode)
	}
	return nil
}

func conformCreate(t *testing.T, tg Target) {
	ctx := context.Background()
	spec := tg.spec(idSeq())
	ep := tg.create(t, spec)
	if err := tg.health(ep); err != nil {
		t.Fatalf("the agent does not answer with its token: %v", err)
	}
	// A second create of a running sandbox changes nothing.
	if err := tg.Runtime.Create(ctx, spec); err != nil {
		t.Fatalf("second create: %v", err)
	}
	st, err := tg.Runtime.Status(ctx, spec.ServerID)
	if err != nil || st.State != runtime.StateReady || st.Endpoint != ep {
		t.Fatalf("after a second create: %+v %v, want ready at %+v", st, err, ep)
	}
	if err := tg.health(ep); err != nil {
		t.Fatalf("after a second create the agent does not answer: %v", err)
	}
}

func conformMissing(t *testing.T, tg Target) {
	st, err := tg.Runtime.Status(context.Background(), idSeq())
	if err != nil || st.State != runtime.StateGone {
		t.Fatalf("status of a sandbox never made: %+v %v, want gone", st, err)
	}
}

func conformDelete(t *testing.T, tg Target) {
	ctx := context.Background()
	spec := tg.spec(idSeq())
	ep := tg.create(t, spec)
	if err := tg.Runtime.Delete(ctx, spec.ServerID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitFor(t, "the deleted sandbox to be gone", func() bool {
		st, err := tg.Runtime.Status(ctx, spec.ServerID)
		return err == nil && st.State == runtime.StateGone
	})
	if err := tg.health(ep); err == nil {
		t.Fatal("the deleted sandbox's agent still answers")
	}
	ids, err := tg.Runtime.List(ctx)
	if err != nil || slices.Contains(ids, spec.ServerID) {
		t.Fatalf("list after delete: %v %v", ids, err)
	}
	if err := tg.Runtime.Delete(ctx, spec.ServerID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func conformLogs(t *testing.T, tg Target) {
	spec := tg.spec(idSeq())
	tg.create(t, spec)
	var logs string
	waitFor(t, "the agent's start in its log", func() bool {
		var err error
		logs, err = tg.Runtime.Logs(context.Background(), spec.ServerID, 100)
		return err == nil && strings.Contains(logs, "listening")
	})
	if one, err := tg.Runtime.Logs(context.Background(), spec.ServerID, 1); err != nil || strings.Count(strings.TrimSuffix(one, "\n"), "\n") > 0 {
		t.Fatalf("a one-line tail is %q (%v)", one, err)
	}
	if strings.Contains(logs, conformanceToken) {
		t.Fatal("the agent's token is in its log")
	}
}

func conformList(t *testing.T, tg Target) {
	a, b := tg.spec(idSeq()), tg.spec(idSeq())
	tg.create(t, a)
	tg.create(t, b)
	ids, err := tg.Runtime.List(context.Background())
	if err != nil || !slices.Contains(ids, a.ServerID) || !slices.Contains(ids, b.ServerID) {
		t.Fatalf("list: %v %v, want %s and %s among them", ids, err, a.ServerID, b.ServerID)
	}
}

func conformFailing(t *testing.T, tg Target) {
	ctx := context.Background()
	spec := tg.Failing
	spec.ServerID, spec.AgentToken = idSeq(), conformanceToken
	if spec.Namespace == "" {
		spec.Namespace, spec.ClientID, spec.OwnerID = tg.namespace(), "conformance", "conformance"
	}
	err := tg.Runtime.Create(ctx, spec)
	t.Cleanup(func() { tg.Runtime.Delete(context.Background(), spec.ServerID) })
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		_, err = tg.Runtime.WaitReady(wctx, spec.ServerID)
	}
	if err == nil {
		t.Fatal("a sandbox that cannot start became ready")
	}
	if !strings.Contains(err.Error(), tg.FailingReason) {
		t.Fatalf("the failure says %q, want it to name %q", err, tg.FailingReason)
	}
}

func conformBadIDs(t *testing.T, tg Target) {
	for _, id := range []string{"", "../x", "A", "a/b", strings.Repeat("a", 64)} {
		spec := tg.spec(id)
		if err := tg.Runtime.Create(context.Background(), spec); err == nil {
			tg.Runtime.Delete(context.Background(), id)
			t.Errorf("create %q succeeded", id)
		}
	}
}
