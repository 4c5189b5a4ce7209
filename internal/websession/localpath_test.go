package websession_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/websession"
)

func TestLocalPath(t *testing.T) {
	for _, ok := range []string{"/", "/servers", "/servers/abc?tab=files&path=a%2Fb", "/account/apps#x"} {
		if !websession.LocalPath(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "servers", "//evil.example", "//evil.example/x", "/\\evil.example", "\\\\evil.example",
		"https://evil.example", "javascript:alert(1)", "/\t/evil.example", "/\n/evil.example", "http:/evil.example",
		"///evil.example"} {
		if websession.LocalPath(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
