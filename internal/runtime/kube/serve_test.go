package kube_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-mcp/berth/internal/kubetest"
	"github.com/berth-mcp/berth/internal/servetest"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// serveBerth runs the real `berth serve --runtime kubernetes` as berth's
// ServiceAccount (a kubeconfig of its own) on a fresh database, until t
// ends, on the control plane e; it returns the URL, an admin token and
// the process. more are more flags of berth serve.
func serveBerth(t testing.TB, e *kubetest.Env, ns string, more ...string) (string, string, *exec.Cmd) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/berth-mcp/berth/cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("build berth: %v\n%s", err, out)
	}
	applyShippedRBACOn(t, e, ns)
	kubeconfig := e.KubeconfigFor(t, ns, "berth")
	data := t.TempDir()
	envv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "BERTH_DATABASE_URL=" + storetest.URL(t)}
	cmd := exec.Command(bin, "serve", "--runtime", "kubernetes", "--kubeconfig", kubeconfig, "--kube-namespaces", ns,
		"--agent-image", agentImage, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn", "--max-servers-per-user", "1000",
		"--max-disk-per-user", "100Ti",
		"--image-pull-policy", string(importedPolicy))
	cmd.Args = append(cmd.Args, more...)
	cmd.Env = envv
	url := servetest.Start(t, cmd).URL
	tok := exec.Command(bin, "token", "create", "--user", "ops", "--data-dir", data)
	tok.Env = envv
	out, err := tok.Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	return url, strings.TrimSpace(string(out)), cmd
}

func call(t testing.TB, url, token, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	var v map[string]any
	json.Unmarshal(raw, &v)
	return v
}

// TestServeOnKubernetes runs the real server binary on this runtime: a
// server started over REST runs commands in its pod, on the real node
// where there is one; stopped, its pod goes.
func TestServeOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	t.Logf("sandbox pods run on %s", nodeNote)
	ns := node.Namespace(t, "serve")
	url, tok, _ := serveBerth(t, node, ns)
	c := call(t, url, tok, "POST", "/api/clients", fmt.Sprintf(`{"name":"serve","namespace":%q}`, ns))
	began := time.Now()
	op := call(t, url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":%q,"wait_seconds":120}`, c["id"], sandboxImage))
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	t.Logf("the server's pod started and its agent answered in %s", time.Since(began).Round(time.Millisecond))
	id := op["server_id"].(string)
	out := call(t, url, tok, "POST", "/api/servers/"+id+"/sessions/s/exec", `{"command":"echo in-a-pod"}`)
	if out["stdout"] != "in-a-pod\n" {
		t.Fatalf("exec: %v", out)
	}
	began = time.Now()
	call(t, url, tok, "DELETE", "/api/servers/"+id, "")
	node.WaitPod(t, ns, id, func(p *corev1.Pod) bool { return p == nil })
	t.Logf("stopped, its pod was gone in %s", time.Since(began).Round(time.Millisecond))
	ready := call(t, url, "", "GET", "/readyz", "")
	if ready["runtime"] != "kubernetes" || ready["confined"] != true {
		t.Fatalf("readyz: %v", ready)
	}
}

// BenchmarkServeRSS starts BERTH_BENCH_PODS (default 200) sandbox pods
// through a real `berth serve` and reports its resident memory.
func BenchmarkServeRSS(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_PODS")); err == nil && v > 0 {
		n = v
	}
	ns := env.Namespace(b, "rss")
	url, tok, cmd := serveBerth(b, env, ns)
	c := call(b, url, tok, "POST", "/api/clients", fmt.Sprintf(`{"name":"rss","namespace":%q}`, ns))
	base := rss(b, cmd.Process.Pid, "VmRSS")
	for b.Loop() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				op := call(b, url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":%q,"wait_seconds":300}`, c["id"], sandboxImage))
				if op["status"] != "SUCCEEDED" {
					b.Errorf("start: %v", op)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(base>>20), "MiB-rss-idle")
	b.ReportMetric(float64(rss(b, cmd.Process.Pid, "VmRSS")>>20), fmt.Sprintf("MiB-rss-%d-pods", n))
	b.ReportMetric(float64(rss(b, cmd.Process.Pid, "VmHWM")>>20), "MiB-rss-peak")
}

func rss(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
