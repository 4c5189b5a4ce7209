package auth

import (
	"context"

	"github.com/berth-mcp/berth/internal/rbac"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p rbac.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the middleware stored in ctx.
func PrincipalFrom(ctx context.Context) (rbac.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(rbac.Principal)
	return p, ok
}
