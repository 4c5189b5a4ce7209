package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestOAuthGrantLifecycle: a code becomes a grant with tokens; revoking
// follows the grant; another client's token is left alone.
func TestOAuthGrantLifecycle(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	now := time.Now()
	if err := s.CreateOAuthClient(ctx, store.OAuthClient{ClientID: "c1", RegistrationTokenHash: hashOf("rat"), AuthMethod: "none", RedirectURIs: []string{"http://127.0.0.1/cb"},
		Metadata: []byte(`{"redirect_uris":["http://127.0.0.1/cb"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OAuthClientByID(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
	if err := s.CreateOAuthCode(ctx, store.NewOAuthCode{CodeHash: hashOf("code1"), UserID: u.ID, ClientID: "c1", Scopes: []string{"berth:read"},
		Resource: "http://127.0.0.1/mcp", RedirectURI: "http://127.0.0.1/cb", CodeChallenge: "ch", ExpiresAt: now.Add(time.Minute),
		PruneCodesExpiredBefore: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var grantID string
	err := s.InOAuthTx(ctx, func(tx *store.OAuthTx) error {
		c, err := tx.CodeForUpdate(ctx, hashOf("code1"))
		if err != nil {
			return err
		}
		if c.Grant.UserID != u.ID || c.Grant.ClientID != "c1" || c.RedirectURI != "http://127.0.0.1/cb" || c.UsedAt != nil {
			t.Errorf("code %+v", c)
		}
		grantID = c.Grant.ID
		if err := tx.MarkCodeUsed(ctx, hashOf("code1"), now); err != nil {
			return err
		}
		if err := tx.InsertOAuthToken(ctx, grantID, store.OAuthAccess, hashOf("at1"), []string{"berth:read"}, now.Add(time.Hour)); err != nil {
			return err
		}
		return tx.InsertOAuthToken(ctx, grantID, store.OAuthRefresh, hashOf("rt1"), []string{"berth:read"}, now.Add(time.Hour))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InOAuthTx(ctx, func(tx *store.OAuthTx) error {
		_, err := tx.CodeForUpdate(ctx, hashOf("unknown"))
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown code: %v", err)
	}
	at, err := s.OAuthAccessTokenByHash(ctx, hashOf("at1"))
	if err != nil || at.Grant.ID != grantID || at.RevokedAt != nil {
		t.Fatalf("access token: %+v %v", at, err)
	}
	// A refresh token is not an access token.
	if _, err := s.OAuthAccessTokenByHash(ctx, hashOf("rt1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refresh token looked up as access token: %v", err)
	}

	// Another client cannot revoke it; its own client revokes the grant
	// by the refresh token.
	if err := s.RevokeOAuthToken(ctx, hashOf("rt1"), "c2"); err != nil {
		t.Fatal(err)
	}
	if at, _ := s.OAuthAccessTokenByHash(ctx, hashOf("at1")); at.RevokedAt != nil || at.Grant.RevokedAt != nil {
		t.Fatal("another client's revocation took effect")
	}
	if err := s.RevokeOAuthToken(ctx, hashOf("rt1"), "c1"); err != nil {
		t.Fatal(err)
	}
	if at, _ := s.OAuthAccessTokenByHash(ctx, hashOf("at1")); at.RevokedAt == nil || at.Grant.RevokedAt == nil {
		t.Fatalf("revoking the refresh token left the grant's access token alive: %+v", at)
	}
}

func TestOAuthConsentsAndClientDeletion(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "bob")
	if have, err := s.ConsentScopes(ctx, u.ID, "c1"); err != nil || have != nil {
		t.Fatalf("no consent yet: %v %v", have, err)
	}
	if err := s.SaveConsent(ctx, u.ID, "c1", "One", []string{"berth:read"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveConsent(ctx, u.ID, "c1", "One renamed", []string{"berth:exec", "berth:read"}); err != nil {
		t.Fatal(err)
	}
	have, err := s.ConsentScopes(ctx, u.ID, "c1")
	if err != nil || len(have) != 2 {
		t.Fatalf("consents add up: %v %v", have, err)
	}
	list, err := s.ListConsents(ctx, u.ID)
	if err != nil || len(list) != 1 || list[0].ClientName != "One renamed" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := s.CreateOAuthCode(ctx, store.NewOAuthCode{CodeHash: hashOf("code2"), UserID: u.ID, ClientID: "c1", Scopes: have,
		Resource: "r", RedirectURI: "u", CodeChallenge: "ch", ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOAuthClient(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListConsents(ctx, u.ID); len(list) != 0 {
		t.Fatalf("consents outlive their client: %+v", list)
	}
	if n := count(t, s, `SELECT count(*) FROM oauth_grants WHERE client_id = 'c1' AND revoked_at IS NULL`); n != 0 {
		t.Fatalf("%d live grants of a deleted client", n)
	}
}

func TestLoginRequests(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	now := time.Now()
	if err := s.CreateLoginRequest(ctx, hashOf("lr1"), "/oauth/authorize?x", now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.LoginRequestPending(ctx, hashOf("lr1"), now); !ok || err != nil {
		t.Fatalf("pending: %v %v", ok, err)
	}
	if ok, _ := s.LoginRequestPending(ctx, hashOf("lr1"), now.Add(2*time.Minute)); ok {
		t.Fatal("an expired login request is pending")
	}
	if to, err := s.TakeLoginRequest(ctx, hashOf("lr1"), now); err != nil || to != "/oauth/authorize?x" {
		t.Fatalf("take: %q %v", to, err)
	}
	if _, err := s.TakeLoginRequest(ctx, hashOf("lr1"), now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a login request taken twice: %v", err)
	}
}
