package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Identity holds the rules about users, session tokens and role
// bindings. It needs only the database, so the CLI uses it alone for
// `berth token` and `berth user`; Service embeds it.
type Identity struct {
	store            *store.Store
	log              *slog.Logger
	defaultNamespace string
	now              func() time.Time
	cache            auth.PrincipalCache
}

// NewIdentity returns the identity rules over st. New users get the member
// role in defaultNamespace ("" = "default").
func NewIdentity(st *store.Store, defaultNamespace string, log *slog.Logger) *Identity {
	if defaultNamespace == "" {
		defaultNamespace = "default"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Identity{store: st, log: log, defaultNamespace: defaultNamespace, now: time.Now}
}

// tokenTouchInterval bounds how often a token's last_used_at is written.
const tokenTouchInterval = time.Minute

// Authenticate resolves a berth session token into a principal. It
// implements auth.Authenticator; credentials of other formats are left to
// the next authenticator.
func (s *Identity) Authenticate(ctx context.Context, credential string) (rbac.Principal, error) {
	if !auth.LooksLikeToken(credential) {
		return rbac.Principal{}, auth.ErrNoMatch
	}
	now := s.now()
	hash := auth.HashToken(credential)
	if p, ok := s.cache.Get(hash, now); ok {
		return p, nil
	}
	tok, user, err := s.store.TokenByHash(ctx, hash, now)
	switch {
	case errors.Is(err, store.ErrTokenExpired):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "token expired")
	case errors.Is(err, store.ErrTokenRevoked):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "token revoked")
	case errors.Is(err, store.ErrUserDisabled):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "user disabled")
	case errors.Is(err, store.ErrNotFound):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "unknown token")
	case err != nil:
		return rbac.Principal{}, fmt.Errorf("look up token: %w", err)
	}
	if tok.LastUsedAt == nil || now.Sub(*tok.LastUsedAt) >= tokenTouchInterval {
		if err := s.store.TouchToken(ctx, tok.ID, now, tokenTouchInterval); err != nil {
			s.log.Warn("record token use", "token_id", tok.ID, "err", err)
		}
	}
	scopes, err := rbac.ParseScopes(tok.Scopes)
	if err != nil {
		return rbac.Principal{}, fmt.Errorf("token %s has bad scopes: %w", tok.ID, err)
	}
	p, err := s.principalFor(ctx, user, scopes, tok.ID)
	if err != nil {
		return rbac.Principal{}, err
	}
	var expiry time.Time
	if tok.ExpiresAt != nil {
		expiry = *tok.ExpiresAt
	}
	p.Expires = expiry
	s.cache.Put(hash, p, now, expiry)
	return p, nil
}

// ForgetCredentials drops the principals cached on this replica, so that
// a revocation made elsewhere in this process (the authorization server's,
// which reaches the session tokens minted with OAuth tokens) applies at
// once; other replicas see it within auth.PrincipalTTL.
func (s *Identity) ForgetCredentials() { s.cache.Forget() }

// principalFor builds a principal with the user's role bindings.
func (s *Identity) principalFor(ctx context.Context, u store.User, scopes []rbac.Scope, tokenID string) (rbac.Principal, error) {
	bs, err := s.store.BindingsFor(ctx, u.ID, u.Groups)
	if err != nil {
		return rbac.Principal{}, fmt.Errorf("role bindings of %s: %w", u.Username, err)
	}
	p := rbac.Principal{UserID: u.ID, Username: u.Username, Groups: u.Groups, Scopes: scopes, TokenID: tokenID}
	for _, b := range bs {
		p.Bindings = append(p.Bindings, rbac.Binding{Role: rbac.Role(b.Role), Namespace: b.Namespace})
	}
	return p, nil
}

// PrincipalForUser builds the principal of a credential issued outside
// the session-token table (an OAuth access token): the user's role
// bindings with the credential's scopes. A missing or disabled user is
// unauthorized, so their outstanding tokens stop working at once.
func (s *Identity) PrincipalForUser(ctx context.Context, userID string, scopes []rbac.Scope, tokenID string) (rbac.Principal, error) {
	u, err := s.store.UserByID(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "the token's user no longer exists")
	}
	if err != nil {
		return rbac.Principal{}, fmt.Errorf("look up user: %w", err)
	}
	if u.Disabled {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "user disabled")
	}
	return s.principalFor(ctx, u, scopes, tokenID)
}

// BrowserPrincipal builds the principal of a signed-in browser (the web
// console): the user's role bindings, with every scope those roles can
// use, since a browser session is the user at the keyboard rather than a
// token handed to a program. A missing or disabled user is unauthorized.
func (s *Identity) BrowserPrincipal(ctx context.Context, userID string) (rbac.Principal, error) {
	p, err := s.PrincipalForUser(ctx, userID, nil, "")
	if err != nil {
		return rbac.Principal{}, err
	}
	p.Scopes = rbac.UsableScopes(p.Bindings)
	return p, nil
}

// Whoami describes the caller: who, which roles where, which scopes.
func (s *Service) Whoami(ctx context.Context, p rbac.Principal) (Whoami, error) {
	w := Whoami{
		UserID: p.UserID, Username: p.Username, Groups: nonNilStrings(p.Groups), TokenID: p.TokenID,
		Scopes: rbac.ScopeStrings(p.Scopes), Roles: []RoleIn{}, Namespaces: []string{},
		Runtime: s.rt.Info().Name, Isolation: s.rt.Info().Isolation, Now: s.now().UTC(),
	}
	for _, b := range p.Bindings {
		w.Roles = append(w.Roles, RoleIn{Role: string(b.Role), Namespace: b.Namespace})
		ns := b.Namespace
		if ns == "" {
			ns = "*"
		}
		if !slices.Contains(w.Namespaces, ns) {
			w.Namespaces = append(w.Namespaces, ns)
		}
	}
	slices.Sort(w.Namespaces)
	return w, nil
}

// EnsureUser returns the user, creating it when missing: the first user
// ever becomes a global admin, later ones members of the default
// namespace.
func (s *Identity) EnsureUser(ctx context.Context, nu store.NewUser) (store.User, bool, error) {
	if err := checkUsername(nu.Username); err != nil {
		return store.User{}, false, err
	}
	return s.store.EnsureUser(ctx, nu, string(rbac.RoleAdmin), string(rbac.RoleMember), s.defaultNamespace)
}

func checkUsername(name string) error {
	name = strings.TrimSpace(name)
	if name == "" {
		return wire.Errorf(wire.CodeBadRequest, "user name is empty")
	}
	if len(name) > 64 || strings.IndexFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r))
	}) >= 0 {
		return wire.Errorf(wire.CodeBadRequest, "user name %q: use 1-64 characters a-z, 0-9, '.', '_', '@', '-'", name)
	}
	return nil
}

// CreateTokenRequest asks for a new session token.
type CreateTokenRequest struct {
	Username string
	Name     string
	// Scopes defaults to read, write and exec, plus admin for global
	// admins.
	Scopes []string
	// ExpiresIn is the lifetime; 0 means no expiry.
	ExpiresIn time.Duration
}

// CreateToken makes a session token for a user (created when missing) on
// the operator's authority: it is what `berth token create` runs with
// direct database access. The clear token is returned once and only its
// hash is stored.
func (s *Identity) CreateToken(ctx context.Context, req CreateTokenRequest) (string, store.Token, error) {
	u, _, err := s.EnsureUser(ctx, store.NewUser{Username: req.Username})
	if err != nil {
		return "", store.Token{}, err
	}
	if req.ExpiresIn < 0 {
		return "", store.Token{}, wire.Errorf(wire.CodeBadRequest, "expiry must be positive, got %s", req.ExpiresIn)
	}
	scopes, err := s.defaultScopes(ctx, u, req.Scopes)
	if err != nil {
		return "", store.Token{}, err
	}
	secret, hash, prefix, err := auth.NewToken()
	if err != nil {
		return "", store.Token{}, fmt.Errorf("generate token: %w", err)
	}
	nt := store.NewToken{UserID: u.ID, Name: req.Name, Prefix: prefix, Hash: hash, Scopes: rbac.ScopeStrings(scopes)}
	if req.ExpiresIn > 0 {
		exp := s.now().Add(req.ExpiresIn)
		nt.ExpiresAt = &exp
	}
	tok, err := s.store.CreateToken(ctx, nt)
	if err != nil {
		return "", store.Token{}, err
	}
	s.audit(ctx, rbac.Principal{Username: "operator"}, "token.create", "token", tok.ID, "", "ok",
		map[string]any{"user": u.Username, "scopes": nt.Scopes, "name": req.Name})
	return secret, tok, nil
}

func (s *Identity) defaultScopes(ctx context.Context, u store.User, asked []string) ([]rbac.Scope, error) {
	if len(asked) > 0 {
		return rbac.ParseScopes(asked)
	}
	scopes := []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec}
	p, err := s.principalFor(ctx, u, nil, "")
	if err != nil {
		return nil, err
	}
	if p.IsAdmin("") {
		scopes = append(scopes, rbac.ScopeAdmin)
	}
	return scopes, nil
}

// ListTokens lists a user's tokens ("" = everyone's) for the operator.
func (s *Identity) ListTokens(ctx context.Context, username string) ([]store.OwnedToken, error) {
	userID := ""
	if username != "" {
		u, err := s.store.UserByName(ctx, username)
		if err != nil {
			return nil, err
		}
		userID = u.ID
	}
	return s.store.ListTokensWithUsers(ctx, userID)
}

// RevokeToken revokes a token by id for the operator.
func (s *Identity) RevokeToken(ctx context.Context, id string) error {
	if err := s.store.RevokeToken(ctx, id, ""); err != nil {
		return err
	}
	s.cache.Forget()
	s.audit(ctx, rbac.Principal{Username: "operator"}, "token.revoke", "token", id, "", "ok", nil)
	return nil
}

// GrantRequest binds a role to a user or a group.
type GrantRequest struct {
	User      string // a username, or
	Group     string // a group name
	Role      string
	Namespace string // "" = every namespace
}

// Grant adds a role binding on the operator's authority (CLI).
func (s *Identity) Grant(ctx context.Context, req GrantRequest) (store.Binding, error) {
	b, err := s.binding(ctx, req)
	if err != nil {
		return store.Binding{}, err
	}
	out, err := s.store.Grant(ctx, b, "operator")
	s.cache.Forget()
	if err == nil {
		s.audit(ctx, rbac.Principal{Username: "operator"}, "role.grant", b.SubjectKind, b.Subject, b.Namespace, "ok", map[string]any{"role": b.Role})
	}
	return out, err
}

// Revoke removes a role binding on the operator's authority (CLI).
func (s *Identity) Revoke(ctx context.Context, req GrantRequest) error {
	b, err := s.binding(ctx, req)
	if err != nil {
		return err
	}
	err = s.store.Revoke(ctx, b)
	s.cache.Forget()
	if err == nil {
		s.audit(ctx, rbac.Principal{Username: "operator"}, "role.revoke", b.SubjectKind, b.Subject, b.Namespace, "ok", map[string]any{"role": b.Role})
	}
	return err
}

func (s *Identity) binding(ctx context.Context, req GrantRequest) (store.Binding, error) {
	role, err := rbac.ParseRole(req.Role)
	if err != nil {
		return store.Binding{}, err
	}
	if req.Namespace != "" {
		if err := checkNamespace(req.Namespace); err != nil {
			return store.Binding{}, err
		}
	}
	switch {
	case (req.User == "") == (req.Group == ""):
		return store.Binding{}, wire.Errorf(wire.CodeBadRequest, "name exactly one of a user or a group")
	case req.User != "":
		u, err := s.store.UserByName(ctx, req.User)
		if err != nil {
			return store.Binding{}, err
		}
		return store.Binding{SubjectKind: "user", Subject: u.ID, Role: string(role), Namespace: req.Namespace}, nil
	default:
		return store.Binding{SubjectKind: "group", Subject: req.Group, Role: string(role), Namespace: req.Namespace}, nil
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
