package wire_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestWriteErrorRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name, code, preset, want string
	}{
		{"unavailable says when to retry", wire.CodeUnavailable, "", "2"},
		{"a Retry-After already set stays", wire.CodeUnavailable, "30", "30"},
		{"other errors have none", wire.CodeInternal, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if c.preset != "" {
				rec.Header().Set("Retry-After", c.preset)
			}
			wire.WriteError(rec, wire.Errorf(c.code, "x"))
			if got := rec.Header().Get("Retry-After"); got != c.want {
				t.Fatalf("Retry-After %q, want %q (status %d)", got, c.want, rec.Code)
			}
			if c.code == wire.CodeUnavailable && rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d", rec.Code)
			}
		})
	}
}
