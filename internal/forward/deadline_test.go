package forward

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-mcp/berth/internal/wire"
)

// silentAgent answers /no-answer never, /silent-body with a first chunk
// and then nothing, /silent-ws with a WebSocket that sends nothing, and
// /trickle with a byte every few milliseconds for a while; each holds its
// request until the forwarder lets go of it.
func silentAgent() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/no-answer", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/silent-body", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "start")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/silent-ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Read(r.Context())
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range 100 {
			io.WriteString(w, ".")
			http.NewResponseController(w).Flush()
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
	})
	return mux
}

// TestIdleTimeoutEndsSilentStreams: a forwarded request, streamed answer
// or WebSocket that moves nothing for the idle timeout ends, with a 504
// naming the server when nothing was answered yet and by cutting the
// connection once the answer has started; one that keeps moving does not.
func TestIdleTimeoutEndsSilentStreams(t *testing.T) {
	f := newForwarder(t, nil)
	f.IdleTimeout = time.Second
	ep := startBackend(t, "unix", silentAgent())
	front := startFront(t, f, Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func(path string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/fwd/"+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}

	resp := get("no-answer")
	var e wire.Error
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || e.Error.Code != wire.CodeGatewayTimeout ||
		!strings.Contains(e.Error.Message, "s1") || !strings.Contains(e.Error.Message, "moved no data for 1s") {
		t.Fatalf("unanswered request: %d %+v, want 504 gateway_timeout naming the server and the timeout", resp.StatusCode, e)
	}

	resp = get("silent-body")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "start" || err == nil || ctx.Err() != nil {
		t.Fatalf("answer that went silent: %d %q %v, want its start and then a cut connection", resp.StatusCode, body, err)
	}

	resp = get("trickle")
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != 100 {
		t.Fatalf("answer that kept moving for longer than the idle timeout: %d bytes, %v; want all 100", len(body), err)
	}

	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/fwd/silent-ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("silent WebSocket: read %v, want the connection closed by the idle timeout", err)
	}
}

// TestBoundCutsWithGatewayTimeout: a call Bound cuts is gateway_timeout
// naming the server and the call; one whose caller went away is not.
func TestBoundCutsWithGatewayTimeout(t *testing.T) {
	f := newForwarder(t, nil)
	target := Target{ServerID: "s1", Endpoint: startBackend(t, "unix", silentAgent()), Token: testToken}
	ctx, cancel := Bound(context.Background(), "s1", "read_file", 100*time.Millisecond)
	defer cancel()
	_, err := f.Do(ctx, target, http.MethodGet, "no-answer", nil, nil)
	if d := wire.DetailOf(err); d.Code != wire.CodeGatewayTimeout || !strings.Contains(d.Message, "server s1: read_file got no answer") {
		t.Fatalf("cut call: %v (%s), want gateway_timeout naming the server and the call", err, d.Code)
	}
	if Cut(ctx) == nil {
		t.Fatal("Cut says nothing cut the call")
	}

	gone, leave := context.WithCancel(context.Background())
	leave()
	_, err = f.Do(gone, target, http.MethodGet, "no-answer", nil, nil)
	if err == nil || wire.DetailOf(err).Code == wire.CodeGatewayTimeout || Cut(gone) != nil {
		t.Fatalf("call whose caller left: %v, want no gateway_timeout", err)
	}
}
