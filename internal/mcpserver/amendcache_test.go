package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func TestAmendCache(t *testing.T) {
	edit := func(result map[string]json.RawMessage) error {
		result["added"] = json.RawMessage(`true`)
		return nil
	}
	c := newAmendCache(edit)
	decoded := func(b []byte) any {
		t.Helper()
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v
	}
	for _, tc := range []struct{ name, body, want string }{
		{"number id", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}` + "\n", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"added":true}}`},
		{"same result, other id", `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`, `{"jsonrpc":"2.0","id":2,"result":{"tools":[],"added":true}}`},
		{"string id that looks like a result", `{"jsonrpc":"2.0","id":"x\",\"result\":{\"evil\":1}}","result":{"tools":[]}}`, `{"jsonrpc":"2.0","id":"x\",\"result\":{\"evil\":1}}","result":{"tools":[],"added":true}}`},
		{"keys in another order", `{"id":3,"jsonrpc":"2.0","result":{"tools":[]}}`, `{"jsonrpc":"2.0","id":3,"result":{"tools":[],"added":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.amend([]byte(tc.body))
			if !ok || !reflect.DeepEqual(decoded(got), decoded([]byte(tc.want))) {
				t.Fatalf("got %s, %v; want %s", got, ok, tc.want)
			}
		})
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"error":{"code":1,"message":"both"}}`,
		`{"jsonrpc":"2.0","id":1,"result":[1]}`,
		`not json`,
	} {
		if got, ok := c.amend([]byte(body)); ok && decoded(got).(map[string]any)["result"].(map[string]any)["added"] == nil {
			t.Errorf("%s: amended to %s without the edit", body, got)
		}
	}
	// Distinct results beyond the bound are amended but not kept.
	for i := range 3 * maxAmendEntries {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"page":%d}}`, i)
		if got, ok := c.amend([]byte(body)); !ok || decoded(got).(map[string]any)["result"].(map[string]any)["page"] != float64(i) {
			t.Fatalf("page %d: %s, %v", i, got, ok)
		}
	}
	if n := len(c.amended); n > maxAmendEntries {
		t.Fatalf("cache holds %d results, bound %d", n, maxAmendEntries)
	}
}
