package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/dirlock"
	"github.com/berth-mcp/berth/internal/wire"
)

// remote is a berth server and the credentials every client command uses
// to call it. Its HTTP client sends the token and, for an OAuth login,
// refreshes the access token when it is about to expire or the server
// refused it, saving the new tokens where the login was saved.
type remote struct {
	URL  string
	auth *tokenSource
	hc   *http.Client
}

// newRemote returns the remote for c; path is the file c was loaded from
// and where refreshed tokens go ("" for BERTH_URL and BERTH_TOKEN).
func newRemote(c cliconfig.Config, path string) *remote {
	ts := &tokenSource{cfg: c, path: path, base: http.DefaultTransport, now: time.Now}
	return &remote{URL: c.URL, auth: ts, hc: &http.Client{Transport: ts}}
}

// HTTP is the client that talks to the server as the logged-in user. It
// has no overall timeout because /mcp calls and exec streams may run for
// minutes; callers bound short calls with their context.
func (r *remote) HTTP() *http.Client { return r.hc }

// Config is the current credentials, refreshed ones included.
func (r *remote) Config() cliconfig.Config { return r.auth.current() }

// refreshSlack refreshes an access token that has less than this left,
// so that a request does not race its expiry.
const refreshSlack = 30 * time.Second

// tokenSource is the http.RoundTripper that adds the bearer token.
type tokenSource struct {
	base http.RoundTripper
	now  func() time.Time
	path string

	mu  sync.Mutex
	cfg cliconfig.Config
}

func (ts *tokenSource) current() cliconfig.Config {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.cfg
}

// errLoginAgain is a refresh that failed: only a new login helps.
type errLoginAgain struct{ err error }

func (e *errLoginAgain) Error() string {
	return fmt.Sprintf("your berth login expired and could not be refreshed (%v): run berth login again", e.err)
}

func (e *errLoginAgain) Unwrap() error { return e.err }

func (ts *tokenSource) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := ts.token(req.Context(), false, "")
	if err != nil {
		return nil, err
	}
	resp, err := ts.send(req, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !ts.refreshable() {
		return resp, err
	}
	// The server refused a token we thought good (revoked early, clock
	// skew): refresh once and retry when the body can be sent again.
	if req.Body != nil && req.GetBody == nil {
		return resp, nil
	}
	resp.Body.Close()
	tok, err = ts.token(req.Context(), true, tok)
	if err != nil {
		return nil, err
	}
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
	return ts.send(req, tok)
}

func (ts *tokenSource) send(req *http.Request, tok string) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return ts.base.RoundTrip(r)
}

func (ts *tokenSource) refreshable() bool {
	c := ts.current()
	return c.OAuth != nil && c.OAuth.RefreshToken != ""
}

// token returns the access token to send, refreshing it first when it is
// about to expire, or when force is set and it is still refused (another
// request may have refreshed it meanwhile).
func (ts *tokenSource) token(ctx context.Context, force bool, refused string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	o := ts.cfg.OAuth
	if o == nil || o.RefreshToken == "" {
		return ts.cfg.Token, nil
	}
	fresh := func(c cliconfig.Config) bool {
		if force {
			return c.Token != refused
		}
		return c.OAuth.ExpiresAt.IsZero() || ts.now().Add(refreshSlack).Before(c.OAuth.ExpiresAt)
	}
	if fresh(ts.cfg) {
		return ts.cfg.Token, nil
	}
	// A refresh token is good once, and the server revokes the whole
	// login when one is used twice: berth processes sharing the file
	// (berth mcp and a berth exec, say) refresh one at a time, and one
	// that finds the file refreshed by another uses that.
	if ts.path != "" {
		unlock, err := lockRefresh(ctx, ts.path)
		if err != nil {
			return "", err
		}
		defer unlock()
		if c, err := cliconfig.Load(ts.path); err == nil && c.OAuth != nil && c.URL == ts.cfg.URL &&
			c.OAuth.RefreshToken != o.RefreshToken && fresh(c) {
			ts.cfg = c
			return c.Token, nil
		}
	}
	tr, err := requestToken(ctx, http.DefaultClient, o.TokenEndpoint, url.Values{
		"grant_type": {"refresh_token"}, "client_id": {o.ClientID}, "refresh_token": {o.RefreshToken},
	})
	if err != nil {
		return "", &errLoginAgain{err}
	}
	next := ts.cfg
	oc := *o
	oc.RefreshToken = tr.RefreshToken
	if oc.RefreshToken == "" {
		oc.RefreshToken = o.RefreshToken // not rotated
	}
	oc.ExpiresAt = tr.expiry(ts.now())
	next.Token, next.OAuth = tr.AccessToken, &oc
	if ts.path != "" {
		if err := cliconfig.Save(ts.path, next); err != nil {
			return "", fmt.Errorf("save refreshed berth login: %w", err)
		}
	}
	ts.cfg = next
	return next.Token, nil
}

// tokenAnswer is an OAuth token endpoint's answer.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
}

func (t tokenAnswer) expiry(now time.Time) time.Time {
	if t.ExpiresIn <= 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(t.ExpiresIn) * time.Second)
}

// requestToken posts form to an OAuth token endpoint. Its errors carry
// the server's error and error_description, never a token.
func requestToken(ctx context.Context, hc *http.Client, endpoint string, form url.Values) (tokenAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var tr tokenAnswer
	raw, status, err := postForm(ctx, hc, endpoint, form)
	if err != nil {
		return tr, err
	}
	if status != http.StatusOK {
		return tr, oauthAnswerError(endpoint, status, raw)
	}
	if err := json.Unmarshal(raw, &tr); err != nil || tr.AccessToken == "" {
		return tr, fmt.Errorf("token endpoint %s answered 200 without an access token", endpoint)
	}
	if !strings.EqualFold(tr.TokenType, "bearer") {
		return tr, fmt.Errorf("token endpoint %s gave a %q token, want Bearer", endpoint, tr.TokenType)
	}
	return tr, nil
}

// postForm posts an urlencoded form and returns the answer's body.
func postForm(ctx context.Context, hc *http.Client, endpoint string, form url.Values) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, fmt.Errorf("endpoint %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot reach %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("read answer of %s: %w", endpoint, err)
	}
	return raw, resp.StatusCode, nil
}

// oauthAnswerError reads an OAuth error answer (RFC 6749 5.2).
func oauthAnswerError(endpoint string, status int, raw []byte) error {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		if e.Description != "" {
			return fmt.Errorf("%s answered %d %s: %s", endpoint, status, e.Error, e.Description)
		}
		return fmt.Errorf("%s answered %d %s", endpoint, status, e.Error)
	}
	return fmt.Errorf("%s answered %d", endpoint, status)
}

// jsonBody encodes in for a request; nil stays nil.
func jsonBody(in any) (io.Reader, error) {
	if in == nil {
		return nil, nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// transportError turns a failed request into the error a user reads: a
// refresh that failed says to log in again; anything else is the server
// being unreachable.
func (r *remote) transportError(err error) error {
	var again *errLoginAgain
	if errors.As(err, &again) {
		return again
	}
	return wire.Errorf(wire.CodeUnavailable, "cannot reach berth at %s: %w", r.URL, err)
}

// lockRefresh takes the lock of the credentials file at path for a
// refresh, waiting (bounded) while another berth process holds it.
func lockRefresh(ctx context.Context, path string) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := dirlock.TryLockFile(path+".lock", dirlock.Holder{PID: os.Getpid(), Command: "berth (token refresh)"})
		var held *dirlock.HeldError
		switch {
		case err == nil:
			return func() { l.Close() }, nil
		case !errors.As(err, &held):
			return nil, fmt.Errorf("lock %s for the token refresh: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("another berth process holds %s.lock: %w", path, err)
		case <-tick.C:
		}
	}
}
