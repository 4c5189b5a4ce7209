package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestServeMetricsListen: `berth serve --metrics-listen` serves the
// Prometheus metrics on that address only (the main listener has no
// /metrics), counting a request it just served by its route, and logs
// that request's access line at Info. The data directory's free space is
// in the metrics and in /readyz.
func TestServeMetricsListen(t *testing.T) {
	berthBin := buildBerth(t)
	data := embeddedDataDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := startServeAs(t, berthBin, data, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, nil,
		"--metrics-listen", addr, "--log-level", "info")

	req, _ := http.NewRequest("GET", p.url+"/healthz", nil)
	req.Header.Set("X-Request-Id", "probe-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") != "probe-1" {
		t.Fatalf("/healthz: %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, text := get("http://" + addr + "/metrics")
	for _, want := range []string{
		`berth_http_requests_total{method="GET",route="/healthz",status_class="2xx"} 1`,
		`berth_servers{state="RUNNING"} 0`,
		`berth_db_pool_max_connections `,
		`berth_data_dir_free_bytes `,
		`berth_data_dir_reserve_bytes 2.147483648e+09`,
		`berth_data_dir_low `,
		`go_goroutines `,
	} {
		if status != http.StatusOK || !strings.Contains(text, want) {
			t.Errorf("metrics (%d) lack %s:\n%s", status, want, text)
		}
	}
	if status, body := get(p.url + "/readyz"); status != http.StatusOK || !strings.Contains(body, `"disk":{"free_bytes":`) {
		t.Errorf("/readyz (%d) does not report the data directory's space: %s", status, body)
	}
	if _, body := get(p.url + "/metrics"); strings.Contains(body, "berth_http_requests_total") {
		t.Errorf("the main listener serves the metrics too")
	}
	if !regexp.MustCompile(`"msg":"request","method":"GET","route":"/healthz","status":200,"duration_ms":[0-9.e-]+,"request_id":"probe-1"`).MatchString(p.log.String()) {
		t.Errorf("no access line for /healthz in the log:\n%s", p.log.String())
	}
}
