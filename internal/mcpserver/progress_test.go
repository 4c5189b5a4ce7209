package mcpserver_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// TestProgressNotifications asks start_server for progress: the caller
// hears the operation's stages before the result arrives.
func TestProgressNotifications(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + tok}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "p"}}, &c)
	params := &mcp.CallToolParams{Name: "start_server", Arguments: map[string]any{"request": map[string]any{
		"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}}
	params.SetProgressToken("start-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("start_server: %v %s", err, text(res))
	}
	// Notifications are handled apart from the result: wait for the last.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		var last *mcp.ProgressNotificationParams
		if n > 0 {
			last = got[n-1]
		}
		mu.Unlock()
		if last != nil && last.Progress == 1 {
			if last.ProgressToken != "start-1" || last.Total != 1 {
				t.Fatalf("last progress %+v", last)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final progress notification; got %d, last %+v", n, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
