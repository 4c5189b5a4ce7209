package telemetry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/telemetry"
)

// TestMetricsAfterRESTAndMCPCalls: after real REST calls, a start, an
// MCP bash call and refused requests, /metrics has the series an
// operator graphs, labelled by route pattern, tool, operation type and
// outcome, and no label carries an id, a user or a token.
func TestMetricsAfterRESTAndMCPCalls(t *testing.T) {
	e := newEnv(t, telemetry.Set{Metrics: metrics.New()})
	tok, alice := e.Token(t, "alice")
	clientID, serverID := e.startServer(t, tok, nil)
	e.must(t, tok, "GET", "/api/servers/"+serverID, nil, nil)
	e.callTool(t, tok, "bash", map[string]any{"server_id": serverID, "command": "echo hi"}, nil)
	if resp, _ := e.do(t, "", "GET", "/api/servers", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := e.do(t, "not-a-token", "GET", "/api/servers", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad token: %d, want 401", resp.StatusCode)
	}

	scrape := httptest.NewServer(e.set.Metrics.Handler())
	defer scrape.Close()
	resp, err := http.Get(scrape.URL)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(text), "berth_http_requests_total{") {
		t.Fatalf("scrape: %d\n%s", resp.StatusCode, text)
	}

	families, err := e.set.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := leaked(l.GetValue(), serverID, clientID, alice.UserID, tok, "not-a-token", "alice"); v != "" {
					t.Errorf("%s has label %s=%q, which carries %q", f.GetName(), l.GetName(), l.GetValue(), v)
				}
			}
		}
	}
	// value returns the series' value (counter, gauge or histogram
	// count) with exactly these labels, or -1 when it is missing.
	value := func(name string, labels map[string]string) float64 {
		f := byName[name]
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		return -1
	}
	atLeast := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"berth_http_requests_total", map[string]string{"route": "/api/servers/{server_id}", "method": "GET", "status_class": "2xx"}, 1},
		{"berth_http_requests_total", map[string]string{"route": "/api/servers", "method": "POST", "status_class": "2xx"}, 1},
		{"berth_http_requests_total", map[string]string{"route": "/api/servers", "method": "GET", "status_class": "4xx"}, 2},
		{"berth_http_requests_total", map[string]string{"route": "/mcp", "method": "POST", "status_class": "2xx"}, 1},
		{"berth_http_request_duration_seconds", map[string]string{"route": "/mcp", "method": "POST", "status_class": "2xx"}, 1},
		{"berth_mcp_tool_calls_total", map[string]string{"tool": "bash", "outcome": "ok"}, 1},
		{"berth_mcp_tool_calls_duration_seconds", map[string]string{"tool": "bash", "outcome": "ok"}, 1},
		{"berth_operations_total", map[string]string{"type": "start_server", "outcome": "ok"}, 1},
		{"berth_operations_duration_seconds", map[string]string{"type": "start_server", "outcome": "ok"}, 1},
		{"berth_exec_duration_seconds", map[string]string{"kind": "session", "outcome": "ok"}, 1},
		{"berth_runtime_calls_total", map[string]string{"method": "create", "outcome": "ok"}, 1},
		{"berth_runtime_calls_duration_seconds", map[string]string{"method": "wait_ready", "outcome": "ok"}, 1},
		{"berth_auth_failures_total", map[string]string{"reason": "missing"}, 1},
		{"berth_auth_failures_total", map[string]string{"reason": "invalid"}, 1},
		{"berth_servers", map[string]string{"state": "RUNNING"}, 1},
		{"berth_servers", map[string]string{"state": "FAILED"}, 0},
		{"berth_warm_pool_servers", map[string]string{}, 0},
		{"berth_warm_pool_claims_total", map[string]string{"result": "hit"}, 0},
		{"berth_db_pool_max_connections", map[string]string{}, 1},
		{"berth_db_pool_acquires_total", map[string]string{}, 1},
	}
	for _, c := range atLeast {
		if got := value(c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}
