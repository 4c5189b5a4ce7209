package store_test

import (
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// BenchmarkAuthPath measures what an authenticated request costs the
// store: the token lookup plus TouchToken. "throttled" is the usual case
// (last use is recent, no write); "write-every-time" is the baseline the
// throttle avoids.
func BenchmarkAuthPath(b *testing.B) {
	s := storetest.New(b)
	ctx := b.Context()
	u, _, err := s.EnsureUser(ctx, store.NewUser{Username: "bench"}, "admin", "member", "")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("bench"), Scopes: []string{"mcp"}})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, minInterval time.Duration) {
		now := time.Now()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			if _, _, err := s.TokenByHash(ctx, hashOf("bench"), now); err != nil {
				b.Fatal(err)
			}
			if err := s.TouchToken(ctx, tok.ID, now, minInterval); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("throttled", func(b *testing.B) { run(b, time.Hour) })
	b.Run("write-every-time", func(b *testing.B) { run(b, 0) })
}

// BenchmarkAuditEntry is one session exec's audit write, the
// asynchronous-commit batch, sequentially: what one PostgreSQL round trip
// of the exec path costs in time (docs/benchmarks.md, "Issue 11: where
// the remaining time goes").
func BenchmarkAuditEntry(b *testing.B) {
	s := storetest.New(b)
	ctx := b.Context()
	e := store.AuditEntry{Actor: "bench", Action: "server.exec", TargetKind: "server", TargetID: "s", Namespace: "default",
		Outcome: store.OutcomeOK, Detail: map[string]any{"kind": "session", "session": "main"}}
	for b.Loop() {
		if err := s.Audit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}
