package mcpgw

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUpstreamToolsListedAndForwarded(t *testing.T) {
	alpha := startUpstream(t, "alpha", "", streamableStateful, "Bearer s3cret-token")
	beta := startUpstream(t, "beta", "", streamableStateless, "")
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "alpha.json", fmt.Sprintf(`{"url": %q, "headers": {"Authorization": "Bearer s3cret-token"}}`, alpha.url()))
		writeConfig(t, dir, "beta.json", fmt.Sprintf(`{"url": %q}`, beta.url()+"?token=query-secret"))
	})
	waitFor(t, "both upstreams' tools", func() bool {
		tools := h.toolNames(t)
		return tools["alpha_t3"] != nil && tools["beta_t3"] != nil
	})

	tools := h.toolNames(t)
	// Five tools each, listed over three pages of two.
	for _, up := range []string{"alpha", "beta"} {
		for _, n := range []string{"echo", "fail", "t1", "t2", "t3"} {
			if tools[up+"_"+n] == nil {
				t.Errorf("tools/list lacks %s_%s", up, n)
			}
		}
	}
	echo := tools["alpha_echo"]
	if echo.Description != "Echo the text back." {
		t.Errorf("alpha_echo description = %q", echo.Description)
	}
	props, _ := echo.InputSchema.(map[string]any)["properties"].(map[string]any)
	if text, _ := props["text"].(map[string]any); text["description"] != "text to echo back" {
		t.Errorf("alpha_echo input schema = %v, want the upstream's", echo.InputSchema)
	}

	res := h.call(t, "alpha_echo", map[string]any{"text": "hi"})
	if res.IsError {
		t.Fatalf("alpha_echo: %s", resultText(res))
	}
	if s := structured(t, res); s["text"] != "hi" || s["upstream"] != "alpha" {
		t.Errorf("alpha_echo structured = %v", s)
	}
	res = h.call(t, "beta_echo", map[string]any{"text": "yo"})
	if s := structured(t, res); s["text"] != "yo" || s["upstream"] != "beta" {
		t.Errorf("beta_echo structured = %v", s)
	}
	res = h.call(t, "beta_t2", nil)
	if res.IsError || resultText(res) != "t2" {
		t.Errorf("beta_t2: isError=%v %q", res.IsError, resultText(res))
	}
	// An upstream's error result comes back as-is.
	res = h.call(t, "alpha_fail", map[string]any{})
	if !res.IsError || resultText(res) != "fail tool failed on purpose" {
		t.Errorf("alpha_fail: isError=%v %q", res.IsError, resultText(res))
	}
	// An upstream's argument validation still applies.
	res = h.call(t, "alpha_echo", map[string]any{"text": 5})
	if !res.IsError {
		t.Errorf("alpha_echo with a number: want an error result, got %q", resultText(res))
	}

	for _, name := range []string{"alpha", "beta"} {
		if u := h.upstream(name); !u.connected || u.tools != 5 || u.lastErr != "" {
			t.Errorf("Upstreams()[%s] = %+v", name, u)
		}
	}
	for _, u := range h.g.Upstreams() {
		if strings.Contains(u.URL, "query-secret") {
			t.Errorf("Upstreams() reports the URL with its secret query: %s", u.URL)
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, "s3cret-token") || strings.Contains(logs, "query-secret") {
		t.Errorf("a secret reached the log:\n%s", logs)
	}
}

func TestUpstreamDownAtStartComesUpLater(t *testing.T) {
	alpha := startUpstream(t, "alpha", "", streamableStateless, "")
	lateAddr := freeAddr(t)
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "alpha.json", fmt.Sprintf(`{"url": %q}`, alpha.url()))
		writeConfig(t, dir, "late.json", fmt.Sprintf(`{"url": "http://%s/mcp"}`, lateAddr))
	})
	waitFor(t, "alpha's tools", func() bool { return h.hasTool(t, "alpha_echo") })
	waitFor(t, "late to be reported down", func() bool { return h.upstream("late").lastErr != "" })

	if u := h.upstream("late"); !u.found || u.connected || u.tools != 0 || !strings.Contains(u.lastErr, "connection refused") {
		t.Errorf("Upstreams()[late] = %+v", u)
	}
	if h.hasTool(t, "late_echo") {
		t.Error("late_echo listed while late has never been up")
	}
	if !strings.Contains(h.logs.String(), "upstream=late") {
		t.Errorf("no warning about late in the log:\n%s", h.logs.String())
	}
	// Everything else works meanwhile.
	if res := h.call(t, "alpha_echo", map[string]any{"text": "a"}); res.IsError {
		t.Fatalf("alpha_echo: %s", resultText(res))
	}
	if res := h.call(t, "bash", map[string]any{"command": "echo ok"}); res.IsError {
		t.Fatalf("bash: %s", resultText(res))
	}
	// Drain notifications caused by alpha's tools appearing.
	for len(h.toolsSeen) > 0 {
		<-h.toolsSeen
	}

	startUpstream(t, "late", lateAddr, streamableStateful, "")
	waitFor(t, "late's tools after a retry", func() bool { return h.hasTool(t, "late_echo") })
	res := h.call(t, "late_echo", map[string]any{"text": "finally"})
	if s := structured(t, res); s["upstream"] != "late" || s["text"] != "finally" {
		t.Fatalf("late_echo = %v", s)
	}
	if u := h.upstream("late"); !u.connected || u.tools != 5 || u.lastErr != "" {
		t.Errorf("Upstreams()[late] after start = %+v", u)
	}
	select {
	case <-h.toolsSeen:
	case <-time.After(20 * time.Second):
		t.Error("the client got no tools/list_changed notification when late's tools appeared")
	}
}

func TestUpstreamDiesMidway(t *testing.T) {
	alpha := startUpstream(t, "alpha", "", streamableStateful, "")
	beta := startUpstream(t, "beta", "", streamableStateless, "")
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "alpha.json", fmt.Sprintf(`{"url": %q}`, alpha.url()))
		writeConfig(t, dir, "beta.json", fmt.Sprintf(`{"url": %q}`, beta.url()))
	})
	waitFor(t, "both upstreams", func() bool { return h.upstream("alpha").connected && h.upstream("beta").connected })

	alpha.stop()
	res := h.call(t, "alpha_echo", map[string]any{"text": "anyone?"})
	if !res.IsError || !strings.Contains(resultText(res), `upstream MCP server "alpha" is unreachable`) {
		t.Fatalf("call to dead upstream: isError=%v %q", res.IsError, resultText(res))
	}
	// The tools of a down upstream stay listed so calls get that answer.
	if !h.hasTool(t, "alpha_echo") {
		t.Error("alpha_echo vanished while alpha is down")
	}
	waitFor(t, "alpha reported down", func() bool { return !h.upstream("alpha").connected })
	res = h.call(t, "alpha_t1", nil)
	if !res.IsError || !strings.Contains(resultText(res), `"alpha" is unreachable`) {
		t.Fatalf("second call to dead upstream: isError=%v %q", res.IsError, resultText(res))
	}
	if res := h.call(t, "beta_echo", map[string]any{"text": "b"}); res.IsError {
		t.Fatalf("beta_echo while alpha is down: %s", resultText(res))
	}
	if res := h.call(t, "read_file", map[string]any{"path": "nothing"}); !res.IsError || !strings.Contains(resultText(res), "no such file") {
		t.Fatalf("read_file while alpha is down: %q", resultText(res))
	}

	// A restarted upstream on the same address is picked up again.
	startUpstream(t, "alpha", alpha.addr, streamableStateful, "")
	waitFor(t, "alpha back", func() bool { return h.upstream("alpha").connected })
	if res := h.call(t, "alpha_echo", map[string]any{"text": "back"}); res.IsError {
		t.Fatalf("alpha_echo after restart: %s", resultText(res))
	}
}

func TestBadConfigFilesSkipped(t *testing.T) {
	good := startUpstream(t, "good", "", streamableStateless, "")
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "good.json", fmt.Sprintf(`{"url": %q}`, good.url()))
		writeConfig(t, dir, "broken.json", `{"url": `)
		writeConfig(t, dir, "ftp.json", `{"url": "ftp://127.0.0.1/mcp"}`)
		writeConfig(t, dir, "typo.json", fmt.Sprintf(`{"url": %q, "header": {"X": "y"}}`, good.url()))
		writeConfig(t, dir, "badheader.json", fmt.Sprintf(`{"url": %q, "headers": {"Bad Name": "hidden-value"}}`, good.url()))
		writeConfig(t, dir, "no url.json", fmt.Sprintf(`{"url": %q}`, good.url()))
		writeConfig(t, dir, "notes.txt", `not a config`)
		if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	waitFor(t, "good's tools", func() bool { return h.hasTool(t, "good_echo") })

	infos := h.g.Upstreams()
	if len(infos) != 1 || infos[0].Name != "good" {
		t.Errorf("Upstreams() = %+v, want only good", infos)
	}
	logs := h.logs.String()
	for _, want := range []string{"broken.json", "invalid JSON", "ftp.json", "scheme", "typo.json", `unknown field \"header\"`, "badheader.json", `\"Bad Name\"`, "no url.json", "must match"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "hidden-value") {
		t.Error("a header value reached the log")
	}
	if n := strings.Count(logs, "file="+filepath.Join(h.dir, "broken.json")); n != 1 {
		t.Errorf("broken.json warned %d times, want once", n)
	}

	// Removing a config file removes its tools.
	if err := os.Remove(filepath.Join(h.dir, "good.json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "good's tools to go", func() bool { return !h.hasTool(t, "good_echo") })
	if len(h.g.Upstreams()) != 0 {
		t.Errorf("Upstreams() = %+v after removal", h.g.Upstreams())
	}
}

func TestUpstreamNameCollisions(t *testing.T) {
	// Upstream "read" with a tool "file" would shadow the built-in read_file;
	// "a" with "b_c" and "a_b" with "c" both want a_b_c.
	read := startUpstream(t, "read", "", streamableStateless, "", "file")
	a := startUpstream(t, "a", "", streamableStateless, "", "b_c")
	ab := startUpstream(t, "a_b", "", streamableStateless, "", "c")
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "read.json", fmt.Sprintf(`{"url": %q}`, read.url()))
		writeConfig(t, dir, "a.json", fmt.Sprintf(`{"url": %q}`, a.url()))
		writeConfig(t, dir, "a_b.json", fmt.Sprintf(`{"url": %q}`, ab.url()))
	})
	waitFor(t, "all upstreams", func() bool {
		return h.upstream("read").connected && h.upstream("a").connected && h.upstream("a_b").connected
	})

	if u := h.upstream("read"); u.tools != 5 {
		t.Errorf("read exposes %d tools, want 5 (its file tool skipped)", u.tools)
	}
	res := h.call(t, "read_file", map[string]any{"path": "nope"})
	if !res.IsError || resultText(res) != "read nope: no such file" {
		t.Errorf("read_file answered by %q, want the built-in", resultText(res))
	}
	if tool := h.toolNames(t)["read_file"]; tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
		t.Error("read_file in tools/list is not the built-in")
	}
	if got := h.upstream("a").tools + h.upstream("a_b").tools; got != 11 {
		t.Errorf("a and a_b expose %d tools together, want 11 (one a_b_c)", got)
	}
	if res := h.call(t, "a_b_c", nil); res.IsError || (resultText(res) != "b_c" && resultText(res) != "c") {
		t.Errorf("a_b_c: isError=%v %q", res.IsError, resultText(res))
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `\"read_file\" is a built-in tool`) || !strings.Contains(logs, "is already taken by upstream") {
		t.Errorf("collisions not logged:\n%s", logs)
	}
}

func TestSSEFallback(t *testing.T) {
	old := startUpstream(t, "old", "", sseOnly, "")
	h := newHarness(t, func(dir string) {
		writeConfig(t, dir, "old.json", fmt.Sprintf(`{"url": %q}`, old.url()))
	})
	waitFor(t, "old's tools", func() bool { return h.hasTool(t, "old_echo") })
	if s := structured(t, h.call(t, "old_echo", map[string]any{"text": "sse"})); s["text"] != "sse" {
		t.Errorf("old_echo = %v", s)
	}
	if !strings.Contains(h.logs.String(), "transport=sse") {
		t.Errorf("log does not say old is on SSE:\n%s", h.logs.String())
	}
}

func TestRunTwiceRefused(t *testing.T) {
	g, err := New(Options{Backend: dirBackend{t.TempDir()}, RetryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	waitFor(t, "Run to start", g.running.Load)
	if err := g.Run(ctx); err == nil {
		t.Error("second concurrent Run: want an error")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
