package websession_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/websession"
)

func TestCSRF(t *testing.T) {
	const key = "berth_bs_session-one"
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour)
	tok := websession.NewCSRF(key, "consent", exp, "client=a&state=1")
	check := func(key, tok, purpose string, at time.Time, binding ...string) error {
		return websession.CheckCSRF(key, tok, purpose, at, binding...)
	}
	if err := check(key, tok, "consent", now, "client=a&state=1"); err != nil {
		t.Fatalf("genuine token refused: %v", err)
	}
	flip := func(i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	dot1 := strings.Index(tok, ".")
	dot2 := dot1 + 1 + strings.Index(tok[dot1+1:], ".")
	cases := []struct {
		name string
		err  error
		got  error
	}{
		{"missing", websession.ErrCSRFMissing, check(key, "", "consent", now, "client=a&state=1")},
		{"no key", websession.ErrCSRFInvalid, check("", tok, "consent", now, "client=a&state=1")},
		{"tampered expiry", websession.ErrCSRFInvalid, check(key, "9"+tok, "consent", now, "client=a&state=1")},
		{"tampered mac", websession.ErrCSRFInvalid, check(key, flip(dot1+3), "consent", now, "client=a&state=1")},
		{"tampered bound mac", websession.ErrCSRFOtherBinding, check(key, flip(dot2+3), "consent", now, "client=a&state=1")},
		{"truncated", websession.ErrCSRFInvalid, check(key, tok[:dot2], "consent", now, "client=a&state=1")},
		{"junk", websession.ErrCSRFInvalid, check(key, "not-a-token", "consent", now)},
		{"too long", websession.ErrCSRFInvalid, check(key, tok+strings.Repeat("A", 300), "consent", now, "client=a&state=1")},
		{"expired", websession.ErrCSRFExpired, check(key, tok, "consent", exp, "client=a&state=1")},
		{"other session", websession.ErrCSRFInvalid, check("berth_bs_session-two", tok, "consent", now, "client=a&state=1")},
		{"other purpose", websession.ErrCSRFInvalid, check(key, tok, "account", now, "client=a&state=1")},
		{"other binding", websession.ErrCSRFOtherBinding, check(key, tok, "consent", now, "client=b&state=1")},
		{"no binding", websession.ErrCSRFOtherBinding, check(key, tok, "consent", now)},
		{"binding split otherwise", websession.ErrCSRFOtherBinding, check(key, tok, "consent", now, "client=a", "&state=1")},
	}
	for _, c := range cases {
		if !errors.Is(c.got, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.err)
		}
	}
	// Fields are length-prefixed: moving a boundary changes the token.
	if websession.NewCSRF(key, "p", exp, "a", "bc") == websession.NewCSRF(key, "p", exp, "ab", "c") {
		t.Fatal("bindings a|bc and ab|c give the same token")
	}
	if websession.MAC(key, "fresh login", "q") == websession.MAC(key, "fresh login", "q", "") ||
		!websession.MACEqual(websession.MAC(key, "x", "q"), websession.MAC(key, "x", "q")) || websession.MACEqual("", "") {
		t.Fatal("MAC does not tell field lists apart, or MACEqual is wrong")
	}
}
