package oidclogin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/berth-mcp/berth/internal/wire"
)

// verify checks the ID token with go-oidc: signature against the
// provider's JWKS, issuer, audience (our client id) and expiry. go-oidc's
// answer is final; when it says no, a signature-only pass finds which
// check failed so the user gets a message that names it.
func (l *Login) verify(ctx context.Context, raw string) (*oidc.IDToken, error) {
	idt, err := l.strict.Verify(ctx, raw)
	if err == nil {
		return idt, nil
	}
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return nil, wire.Errorf(wire.CodeUnauthorized, "the ID token expired at %s (now %s)",
			expired.Expiry.UTC().Format(time.RFC3339), l.now().UTC().Format(time.RFC3339))
	}
	t, sigErr := l.sigOnly.Verify(ctx, raw)
	switch {
	case sigErr != nil:
		return nil, wire.Errorf(wire.CodeUnauthorized, "bad ID token signature: it does not verify against the keys (JWKS) of %s: %v", l.cfg.Issuer, sigErr)
	case t.Issuer != l.cfg.Issuer:
		return nil, wire.Errorf(wire.CodeUnauthorized, "the ID token was issued by %q, not by %q", clip(t.Issuer), l.cfg.Issuer)
	case !slices.Contains(t.Audience, l.cfg.ClientID):
		return nil, wire.Errorf(wire.CodeUnauthorized, "wrong audience: the ID token is for %q, not for this client %q", clip(strings.Join(t.Audience, ", ")), l.cfg.ClientID)
	}
	return nil, wire.Errorf(wire.CodeUnauthorized, "the ID token was rejected: %v", err)
}
