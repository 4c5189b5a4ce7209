package kube_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestUpstreamsConfigMap: a sandbox's MCP upstream declarations are a
// ConfigMap the pod owns, mounted read-only where the agent is told to
// read them, and the agent reads them; a sandbox without upstreams gets
// the flag and an empty ConfigMap too.
func TestUpstreamsConfigMap(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx := context.Background()
	s := spec(ns, "upstreams-1")
	s.Upstreams = []runtime.Upstream{{Name: "tools", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"X-Key": "k"}}}
	plain := spec(ns, "upstreams-0")
	for _, sp := range []runtime.Spec{s, plain} {
		if err := rt.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Delete(context.Background(), sp.ServerID) })
	}
	ep := waitReady(t, rt, s.ServerID)
	waitReady(t, rt, plain.ServerID)

	for _, tc := range []struct {
		spec runtime.Spec
		data map[string]string
	}{
		{s, map[string]string{"tools.json": `{"url":"http://127.0.0.1:9/mcp","headers":{"X-Key":"k"}}`}},
		{plain, map[string]string{}},
	} {
		id := tc.spec.ServerID
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, id+"-mcp-upstreams", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: upstreams config map: %v", id, err)
		}
		if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != pod.UID || cm.Immutable == nil || !*cm.Immutable {
			t.Errorf("%s: config map owners %+v immutable %v, want immutable and owned by the pod", id, cm.OwnerReferences, cm.Immutable)
		}
		if len(cm.Data) != len(tc.data) {
			t.Errorf("%s: config map holds %v, want %v", id, cm.Data, tc.data)
		}
		for k, v := range tc.data {
			if cm.Data[k] != v {
				t.Errorf("%s: config map key %s = %q, want %q", id, k, cm.Data[k], v)
			}
		}
		c := pod.Spec.Containers[0]
		if i := slices.Index(c.Args, "--upstreams-dir"); i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != runtime.UpstreamsDir {
			t.Errorf("%s: agent args %v, want --upstreams-dir %s", id, c.Args, runtime.UpstreamsDir)
		}
		var mounted bool
		for _, m := range c.VolumeMounts {
			if m.MountPath != runtime.UpstreamsDir {
				continue
			}
			mounted = m.ReadOnly
			for _, v := range pod.Spec.Volumes {
				if v.Name == m.Name && (v.ConfigMap == nil || v.ConfigMap.Name != cm.Name) {
					t.Errorf("%s: volume %s at %s is %+v, want the config map %s", id, v.Name, m.MountPath, v.VolumeSource, cm.Name)
				}
			}
		}
		if !mounted {
			t.Errorf("%s: mounts %+v, want %s read-only", id, c.VolumeMounts, runtime.UpstreamsDir)
		}
	}

	// The agent read the declaration: it reports the upstream (down, as
	// nothing listens there).
	var caps wire.Capabilities
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep.Address+"/api/capabilities", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&caps); err != nil {
		t.Fatal(err)
	}
	if len(caps.Upstreams) != 1 || caps.Upstreams[0].Name != "tools" || caps.Upstreams[0].Connected {
		t.Fatalf("the agent reports upstreams %+v, want tools, not connected", caps.Upstreams)
	}

	// The ConfigMap goes with its pod.
	if err := rt.Delete(ctx, s.ServerID); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, s.ServerID+"-mcp-upstreams", metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the upstreams config map outlived its pod")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
