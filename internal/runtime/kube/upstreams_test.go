package kube_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestUpstreamsSecret: a sandbox's MCP upstream declarations, whose
// headers may be credentials, are an immutable Secret the pod owns (never
// a ConfigMap, which is stored in clear), mounted read-only and readable
// by the sandbox's uid only where the agent is told to read them, and the
// agent reads them; a sandbox without upstreams gets the flag and an
// empty Secret too.
func TestUpstreamsSecret(t *testing.T) {
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
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, id+"-mcp-upstreams", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: upstreams config map: %v, want none (headers may be credentials)", id, err)
		}
		sec, err := env.Client.CoreV1().Secrets(ns).Get(ctx, id+"-mcp-upstreams", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: upstreams secret: %v", id, err)
		}
		if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != pod.UID || sec.Immutable == nil || !*sec.Immutable {
			t.Errorf("%s: secret owners %+v immutable %v, want immutable and owned by the pod", id, sec.OwnerReferences, sec.Immutable)
		}
		if len(sec.Data) != len(tc.data) {
			t.Errorf("%s: secret holds %v, want %v", id, sec.Data, tc.data)
		}
		for k, v := range tc.data {
			if string(sec.Data[k]) != v {
				t.Errorf("%s: secret key %s = %q, want %q", id, k, sec.Data[k], v)
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
				if v.Name != m.Name {
					continue
				}
				if v.Secret == nil || v.Secret.SecretName != sec.Name || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 {
					t.Errorf("%s: volume %s at %s is %+v, want the secret %s readable by its owner only", id, v.Name, m.MountPath, v.VolumeSource, sec.Name)
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

	// The Secret goes with its pod.
	if err := rt.Delete(ctx, s.ServerID); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for {
		_, err := env.Client.CoreV1().Secrets(ns).Get(ctx, s.ServerID+"-mcp-upstreams", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the upstreams secret outlived its pod: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
