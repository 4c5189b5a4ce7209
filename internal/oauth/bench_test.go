package oauth_test

import (
	"testing"
)

// BenchmarkAuthenticate compares resolving an OAuth access token with
// resolving a session token (the baseline), both against the real
// database.
func BenchmarkAuthenticate(b *testing.B) {
	e := newEnv(b, nil)
	session, _ := e.orch.Token(b, "bench-session")
	reg := e.registerPublic(b, "Bench")
	p := newPKCE(b)
	tok := mustToken(b, e.exchange(b, reg.ClientID, e.browser(b, "bench-oauth").code(e.authParams(reg.ClientID, p)), p))
	b.Run("session-token", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.orch.Svc.Authenticate(b.Context(), session); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("oauth-access-token", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.as.Authenticate(b.Context(), tok.AccessToken); err != nil {
				b.Fatal(err)
			}
		}
	})
}
