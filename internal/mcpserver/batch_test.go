package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// listBatch is a JSON-RPC batch of n tools/list calls, each padded with
// pad bytes of _meta.
func listBatch(n, pad int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{"pad":%q}}}`, i+1, strings.Repeat("x", pad))
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// rpcError decodes the JSON-RPC error of a refused POST.
func rpcError(t testing.TB, body string) (int, string) {
	t.Helper()
	var m struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error.Code == 0 || m.ID != nil {
		t.Fatalf("answer %q is not a JSON-RPC error without an id (%v)", body, err)
	}
	return m.Error.Code, m.Error.Message
}

func TestBatchLimits(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	cases := []struct {
		name, version string
		n             int
		want          int
		words         []string // the refusal names them
	}{
		{"short batch, 2025-03-26", "2025-03-26", 20, 200, nil},
		{"short batch, no version header (read as 2025-03-26)", "", 3, 200, nil},
		{"short batch, 2024-11-05", "2024-11-05", 2, 200, nil},
		{"long batch", "2025-03-26", 21, 400, []string{"at most 20 messages"}},
		{"long batch, no version header", "", 21, 400, []string{"at most 20 messages"}},
		{"any batch, 2025-06-18", "2025-06-18", 2, 400, []string{"2025-06-18", "one message per POST"}},
		{"any batch, 2025-11-25", "2025-11-25", 1, 400, []string{"MCP-Protocol-Version 2025-11-25"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := rawCall(t, e, tok, c.version, listBatch(c.n, 0))
			if status != c.want {
				t.Fatalf("status %d, want %d: %.300s", status, c.want, body)
			}
			if status == http.StatusOK {
				var answers []json.RawMessage
				if err := json.Unmarshal([]byte(body), &answers); err != nil || len(answers) != c.n {
					t.Fatalf("want %d answers, got %d (%v): %.300s", c.n, len(answers), err, body)
				}
				return
			}
			code, msg := rpcError(t, body)
			if code != -32600 {
				t.Errorf("JSON-RPC code %d, want -32600 (invalid request)", code)
			}
			for _, w := range c.words {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
		})
	}
	t.Run("single message, 2025-06-18", func(t *testing.T) {
		if status, body := rawCall(t, e, tok, "2025-06-18", listTools); status != 200 || !strings.Contains(body, `"tools"`) {
			t.Fatalf("%d %.300s", status, body)
		}
	})
}

// TestHugeBatchIsRefusedCheaply sends what once took berth 15 s and
// 938 MB: 5000 tools/list calls in one body just under the 4 MiB limit.
// It is refused at once, and answering it allocates little more than the
// body itself (every byte the process allocates counts, so this bounds
// how far the heap could have grown).
func TestHugeBatchIsRefusedCheaply(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	body := listBatch(5000, 750)
	if len(body) < 4<<20-200<<10 || len(body) >= 4<<20 {
		t.Fatalf("the batch is %d bytes; want just under 4 MiB", len(body))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	status, answer := rawCall(t, e, tok, "", body)
	took := time.Since(start)
	runtime.ReadMemStats(&after)

	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %.300s", status, answer)
	}
	if _, msg := rpcError(t, answer); !strings.Contains(msg, "at most 20 messages") {
		t.Fatalf("refusal %q does not name the limit", msg)
	}
	if took > 5*time.Second {
		t.Errorf("refusing the batch took %s", took)
	}
	const budget = 48 << 20 // the answer alone used to be 161 MB
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > budget {
		t.Errorf("refusing a %d-byte batch allocated %d MiB, want under %d MiB", len(body), allocated>>20, budget>>20)
	}
	t.Logf("refused a %d-byte batch in %s, allocating %d MiB", len(body), took, allocated>>20)
}
