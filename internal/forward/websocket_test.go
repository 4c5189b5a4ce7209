package forward

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestForwardWebSocket echoes messages through the forwarder to a backend
// on TCP and on a unix socket. The backend refuses upgrades without the
// agent token, so a passing test also shows the token is injected.
func TestForwardWebSocket(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			ep := startBackend(t, network, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+testToken {
					http.Error(w, "no agent token", http.StatusUnauthorized)
					return
				}
				c, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				defer c.CloseNow()
				c.SetReadLimit(1 << 20)
				for {
					typ, msg, err := c.Read(r.Context())
					if err != nil {
						return
					}
					if err := c.Write(r.Context(), typ, append([]byte("echo:"), msg...)); err != nil {
						return
					}
				}
			}))
			front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			wsURL := "ws" + strings.TrimPrefix(front.URL, "http") + "/fwd/api/ws?x=1"
			c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
				HTTPHeader: http.Header{"Authorization": {"Bearer caller-secret"}},
			})
			if err != nil {
				t.Fatalf("dial %s: %v (response %v)", wsURL, err, resp)
			}
			defer c.CloseNow()
			c.SetReadLimit(1 << 20)

			big := strings.Repeat("x", 256<<10)
			for i, msg := range []string{"hello", "second", big} {
				typ := websocket.MessageText
				if i == 1 {
					typ = websocket.MessageBinary
				}
				if err := c.Write(ctx, typ, []byte(msg)); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				gotTyp, got, err := c.Read(ctx)
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if gotTyp != typ || string(got) != "echo:"+msg {
					t.Fatalf("message %d came back as %v %.40q, want %v %.40q", i, gotTyp, got, typ, "echo:"+msg)
				}
			}
			if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}
