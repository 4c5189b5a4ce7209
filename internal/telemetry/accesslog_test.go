package telemetry_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/telemetry"
)

// TestAccessLog: every request gets one Info line saying who called
// what (method, route pattern, tool, status, duration, user id, request
// id) and nothing secret: not the token (in either header), not an env
// value a sandbox was started with, not another header's value. A safe
// X-Request-Id is kept and returned; an unsafe one is replaced.
func TestAccessLog(t *testing.T) {
	e := newEnv(t, telemetry.Set{})
	tok, alice := e.Token(t, "alice")
	const envSecret, headerSecret = "envsecret-5f1c9a7e", "headersecret-2b8d4e61"
	_, serverID := e.startServer(t, tok, map[string]string{"API_KEY": envSecret})
	resp, _ := e.callTool(t, tok, "bash", map[string]any{"server_id": serverID, "command": "echo $API_KEY"},
		map[string]string{"X-Request-Id": "req-abc.123", "X-Custom": headerSecret})
	if got := resp.Header.Get("X-Request-Id"); got != "req-abc.123" {
		t.Errorf("X-Request-Id answered %q, want the caller's req-abc.123", got)
	}
	// The session header instead of Authorization, and an id that must
	// not reach the log as it is.
	for _, bad := range []string{"a b<script>", strings.Repeat("x", 200)} {
		resp, raw := e.do(t, "", "GET", "/api/servers/"+serverID, nil, map[string]string{"Berth-Session-Token": tok, "X-Request-Id": bad})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("get_server: %d %s", resp.StatusCode, raw)
		}
		if got := resp.Header.Get("X-Request-Id"); !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(got) {
			t.Errorf("X-Request-Id %q answered %q, want a fresh id", bad, got)
		}
	}
	if resp, _ := e.do(t, "", "GET", "/api/servers", nil, nil); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("refused request: %d with X-Request-Id %q, want 401 with one", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}

	log := e.log.String()
	if v := leaked(log, tok, envSecret, headerSecret, "a b<script>", strings.Repeat("x", 200)); v != "" {
		t.Fatalf("the log holds %q:\n%s", v, log)
	}
	type line struct {
		Msg        string   `json:"msg"`
		Method     string   `json:"method"`
		Route      string   `json:"route"`
		Tool       string   `json:"tool"`
		UserID     string   `json:"user_id"`
		RequestID  string   `json:"request_id"`
		Status     int      `json:"status"`
		DurationMS *float64 `json:"duration_ms"`
	}
	var requests []line
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var head struct{ Msg string }
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		if head.Msg != "request" {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("request line %s: %v", sc.Bytes(), err)
		}
		requests = append(requests, l)
	}
	// register_client, start_server, bash, two get_server, one refused.
	if len(requests) != 6 {
		t.Fatalf("%d request lines, want 6:\n%s", len(requests), log)
	}
	var mcp *line
	for i, l := range requests {
		if strings.Contains(l.Route, serverID) || l.RequestID == "" || l.DurationMS == nil || l.Status == 0 {
			t.Errorf("request line %+v: want a route pattern, a request id, a status and a duration", l)
		}
		if l.RequestID == "req-abc.123" {
			mcp = &requests[i]
		}
	}
	if mcp == nil {
		t.Fatalf("no line with the caller's request id:\n%s", log)
	}
	if want := (line{Msg: "request", Method: "POST", Route: "/mcp", Tool: "bash", UserID: alice.UserID, RequestID: "req-abc.123", Status: 200, DurationMS: mcp.DurationMS}); *mcp != want {
		t.Errorf("MCP line %+v, want %+v", *mcp, want)
	}
	if last := requests[len(requests)-1]; last.Status != http.StatusUnauthorized || last.UserID != "" || last.Route != "/api/servers" {
		t.Errorf("refused request's line %+v: want 401, route /api/servers, no user", last)
	}
}
