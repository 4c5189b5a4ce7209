package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// An OAuth client holding berth:read calls bash without server_id, is
// refused with a challenge, and gets a token with exactly the scopes the
// challenge names, as clients do: that one step-up is enough, because
// the challenge names berth:write (the call may register a client and
// start the session's sandbox) along with berth:exec.
func TestBashWithoutServerStepsUpOnce(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	e.Token(t, "admin")
	readOnly, _ := e.Token(t, "alice", "berth:read")
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"session":"stepup","command":"echo stepped-up"}}}`
	post := func(token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := post(readOnly)
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) {
		t.Fatalf("bash with berth:read: %d %q %s; want 403 insufficient_scope", resp.StatusCode, ch, body)
	}
	granted := challengeScopes(ch)
	for _, want := range []string{"berth:read", "berth:write", "berth:exec"} {
		if !strings.Contains(" "+strings.Join(granted, " ")+" ", " "+want+" ") {
			t.Errorf("challenge %q does not name %s", ch, want)
		}
	}

	stepped, _ := e.Token(t, "alice", granted...)
	resp, body = post(stepped)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bash after one step-up to %v: %d %q %s", granted, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	var rpc struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Stdout string `json:"stdout"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	if rpc.Result.IsError || !strings.Contains(rpc.Result.StructuredContent.Stdout, "stepped-up") {
		t.Fatalf("bash after one step-up to %v answered %s; want the command's output", granted, body)
	}
}
