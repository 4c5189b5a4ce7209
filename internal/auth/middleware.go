package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// SessionTokenHeader is the alternative to Authorization: Bearer for
// clients that cannot set Authorization.
const SessionTokenHeader = "Berth-Session-Token"

// Authenticator resolves a presented credential. The middleware tries its
// authenticators in order, so new credential kinds (OAuth access tokens)
// slot in beside session tokens.
type Authenticator interface {
	// Authenticate returns the principal, or ErrNoMatch when it does not
	// recognize the credential's format (the next authenticator is tried),
	// or any other error, which ends the attempt. A wire.CodeUnauthorized
	// error (e.g. "token expired") becomes a 401 invalid_token answer; other
	// codes are answered with their own status.
	Authenticate(ctx context.Context, credential string) (rbac.Principal, error)
}

// ErrNoMatch tells the middleware to try the next authenticator.
var ErrNoMatch = errors.New("credential not recognized")

// MiddlewareOptions configures Middleware and the answers it writes.
type MiddlewareOptions struct {
	Authenticators []Authenticator
	// Realm goes into WWW-Authenticate; "" means "berth".
	Realm string
	// ResourceMetadataURL returns the RFC 9728 protected-resource metadata
	// URL for the challenge; nil leaves it out.
	ResourceMetadataURL func(r *http.Request) string
	// Scopes returns the scopes the endpoint needs, for the challenge's
	// scope parameter; nil leaves it out.
	Scopes func(r *http.Request) []string
	// Logger receives one line per refused request; nil discards.
	Logger *slog.Logger
	// Failed, when set, is told each refused request's reason, one of
	// the Failure values (a bounded set, for metrics).
	Failed func(reason Failure)
}

// Failure is why a request was refused.
type Failure string

const (
	FailureMalformed Failure = "malformed" // the credential headers were unusable (400)
	FailureMissing   Failure = "missing"   // no credential was sent
	FailureInvalid   Failure = "invalid"   // unknown, expired or revoked credential
	FailureError     Failure = "error"     // checking it failed (database, internal)
)

// Failures are every Failure, for pre-binding metrics.
var Failures = []Failure{FailureMalformed, FailureMissing, FailureInvalid, FailureError}

func (o MiddlewareOptions) failed(reason Failure) {
	if o.Failed != nil {
		o.Failed(reason)
	}
}

// Middleware authenticates every request. The credential comes from
// "Authorization: Bearer <token>" or "Berth-Session-Token: <token>"; two
// different ones are a 400. On success the principal is stored in the
// request context (PrincipalFrom). On failure it answers 401 with a JSON
// error and a Bearer challenge, which carries error="invalid_token" only
// when a credential was sent (RFC 6750 section 3.1). No header, including
// Mcp-Session-Id, lets a request through without a credential. The
// credential is never logged nor echoed.
func Middleware(opts MiddlewareOptions) func(http.Handler) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			reqAttrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("remote", r.RemoteAddr),
			}
			cred, err := credentialFrom(r.Header)
			if err != nil {
				logger.LogAttrs(ctx, slog.LevelInfo, "authentication refused",
					append(reqAttrs, slog.String("reason", err.Error()))...)
				opts.failed(FailureMalformed)
				c := newChallenge(opts.Realm)
				c.add("error", "invalid_request")
				c.add("error_description", err.Error())
				c.add("resource_metadata", opts.metadataURL(r))
				w.Header().Set("WWW-Authenticate", c.String())
				writeJSONError(w, wire.CodeBadRequest, err.Error())
				return
			}
			if cred.token == "" {
				logger.LogAttrs(ctx, slog.LevelDebug, "authentication required",
					append(reqAttrs, slog.String("reason", cred.missingReason))...)
				opts.failed(FailureMissing)
				writeUnauthorized(w, r, opts, false, cred.missingReason)
				return
			}

			p, which, err := authenticate(ctx, opts.Authenticators, cred.token)
			if err != nil {
				reqAttrs = append(reqAttrs, slog.String("authenticator", which))
				det := wire.DetailOf(err)
				msg := redact(det.Message, cred.token)
				if det.Code == wire.CodeUnauthorized {
					logger.LogAttrs(ctx, slog.LevelInfo, "authentication failed",
						append(reqAttrs, slog.String("reason", msg))...)
					opts.failed(FailureInvalid)
					writeUnauthorized(w, r, opts, true, msg)
					return
				}
				logger.LogAttrs(ctx, slog.LevelError, "authentication error",
					append(reqAttrs, slog.String("code", det.Code), slog.String("error", msg))...)
				opts.failed(FailureError)
				switch det.Code {
				case wire.CodeInternal:
					// Internal details (SQL, addresses) are for the log.
					msg = "authentication failed: internal error"
				case wire.CodeUnavailable:
					// The credential may be fine: the store behind it
					// (the database) cannot be asked right now.
					msg = "authentication is unavailable for now (berth cannot reach its database); retry in a few seconds"
				}
				writeJSONError(w, det.Code, msg)
				return
			}
			logger.LogAttrs(ctx, slog.LevelDebug, "authenticated",
				append(reqAttrs, slog.String("user_id", p.UserID), slog.String("token_id", p.TokenID))...)
			observe.RequestFrom(ctx).SetUser(p.UserID)
			next.ServeHTTP(w, r.WithContext(WithPrincipal(ctx, p)))
		})
	}
}

// presented is the credential of a request; token is "" when none was
// sent, and missingReason then says why nothing usable was found.
type presented struct {
	token         string
	missingReason string
}

// credentialFrom reads the credential. Its errors are malformed requests
// (400); they never contain the credential.
func credentialFrom(h http.Header) (presented, error) {
	authz := h.Values("Authorization")
	session := h.Values(SessionTokenHeader)
	if len(authz) > 1 {
		return presented{}, errors.New("more than one Authorization header")
	}
	if len(session) > 1 {
		return presented{}, fmt.Errorf("more than one %s header", SessionTokenHeader)
	}

	var bearer string
	missing := "no credential: send Authorization: Bearer <token> or " + SessionTokenHeader + ": <token>"
	if len(authz) == 1 {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(authz[0]), " ")
		if strings.EqualFold(scheme, "Bearer") {
			bearer = strings.TrimSpace(rest)
			if bearer == "" {
				return presented{}, errors.New("empty Bearer token in Authorization header")
			}
		} else {
			// Another scheme counts as no credential (RFC 6750 3.1), so
			// the client is told which scheme to use.
			missing = "unsupported Authorization scheme: use Bearer"
		}
	}
	var sess string
	if len(session) == 1 {
		sess = strings.TrimSpace(session[0])
		if sess == "" {
			return presented{}, fmt.Errorf("empty %s header", SessionTokenHeader)
		}
	}

	switch {
	case bearer != "" && sess != "":
		if subtle.ConstantTimeCompare([]byte(bearer), []byte(sess)) != 1 {
			return presented{}, fmt.Errorf("Authorization and %s headers carry different credentials", SessionTokenHeader)
		}
		return presented{token: bearer}, nil
	case bearer != "":
		return presented{token: bearer}, nil
	case sess != "":
		return presented{token: sess}, nil
	}
	return presented{missingReason: missing}, nil
}

// authenticate tries each authenticator in turn and also returns which one
// decided, for the log. Errors are returned unwrapped because their
// message is the answer's error_description.
func authenticate(ctx context.Context, authenticators []Authenticator, cred string) (rbac.Principal, string, error) {
	for _, a := range authenticators {
		p, err := a.Authenticate(ctx, cred)
		if errors.Is(err, ErrNoMatch) {
			continue
		}
		which := fmt.Sprintf("%T", a)
		if err != nil {
			return rbac.Principal{}, which, err
		}
		if p.UserID == "" {
			return rbac.Principal{}, which, fmt.Errorf("authenticator %s returned a principal without a user id", which)
		}
		return p, which, nil
	}
	return rbac.Principal{}, "none", wire.Errorf(wire.CodeUnauthorized, "credential not recognized")
}

// writeUnauthorized answers 401 with a Bearer challenge; the error
// parameters only go with a credential that was sent.
func writeUnauthorized(w http.ResponseWriter, r *http.Request, opts MiddlewareOptions, credentialSent bool, message string) {
	c := newChallenge(opts.Realm)
	if credentialSent {
		c.add("error", "invalid_token")
		c.add("error_description", message)
	}
	c.add("scope", opts.endpointScopes(r))
	c.add("resource_metadata", opts.metadataURL(r))
	w.Header().Set("WWW-Authenticate", c.String())
	writeJSONError(w, wire.CodeUnauthorized, message)
}

// redact removes the credential from a message an authenticator wrote, in
// case it echoed what it was given.
func redact(msg, cred string) string {
	if cred == "" {
		return msg
	}
	return strings.ReplaceAll(msg, cred, "[redacted]")
}
