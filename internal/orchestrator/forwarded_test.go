package orchestrator

import (
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// TestForwardedResponseEncode: the text built at its final size is what
// Marshal gives.
func TestForwardedResponseEncode(t *testing.T) {
	for _, fr := range []ForwardedResponse{
		{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json", "X": "<&>"}, Body: "{\"stdout\":\"a\\u0000\\n\"}\x00\xff\u2028"},
		{StatusCode: 404, Headers: map[string]string{}, Body: ""},
		{StatusCode: 200},
	} {
		want, err := wire.Marshal(fr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fr.encode()
		if err != nil || string(got) != string(want) {
			t.Errorf("encode = %s, %v; Marshal gives %s", got, err, want)
		}
	}
}
