package kube_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/runtime/kube"
)

// TestPodProxyNetwork reaches a sandbox through the API server's pod
// proxy, as berth's ServiceAccount: on the real node, its agent answers.
// The API server refuses to proxy to the loopback addresses the stand-in
// kubelet gives pods ("address not allowed"), so there the test goes as
// far as that refusal: it shows the request reached the proxy of the
// right pod and port (a wrong path would be a 404, a missing right a 403).
func TestPodProxyNetwork(t *testing.T) {
	rt, ns := newNodeRuntime(t, kube.Options{PodNetwork: kube.PodNetworkAPIServer})
	ctx := context.Background()
	s := spec(ns, "proxied")
	if err := rt.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), s.ServerID) })
	ep := waitReady(t, rt, s.ServerID)
	if ep.Network != "kube-apiserver" || ep.Address != ns+"/"+s.ServerID+":7070" {
		t.Fatalf("endpoint %+v", ep)
	}
	tr, err := rt.Transport(ep)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://agent/api/capabilities?x=1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if onRealNode() {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "isolation") {
			t.Fatalf("through the pod proxy: %d %s", resp.StatusCode, body)
		}
		return
	}
	if !strings.Contains(string(body), "address not allowed") {
		t.Fatalf("through the pod proxy: %d %s", resp.StatusCode, body)
	}
}
