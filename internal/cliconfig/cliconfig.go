// Package cliconfig owns the berth command-line client's saved
// credentials: the server URL and the token that `berth login` checks and
// stores (a session token, or OAuth access and refresh tokens with what is
// needed to refresh and revoke them), and that every client command uses.
// The file holds secrets, so it is written owner-only and atomically: a crash leaves
// either the old file or the new one, never half of one.
package cliconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// ErrNotLoggedIn is returned by Load when no credentials are saved.
var ErrNotLoggedIn = errors.New("not logged in")

// Config is what `berth login` saves.
type Config struct {
	// URL is the server's base URL without a trailing slash, e.g.
	// https://berth.example.com.
	URL string `json:"url"`
	// Token is sent as "Authorization: Bearer": a session token, or an
	// OAuth access token.
	Token string `json:"token"`
	// OAuth is set when Token came from the OAuth flow of `berth login`.
	OAuth *OAuth `json:"oauth,omitempty"`
}

// OAuth is what refreshing and revoking an OAuth access token needs.
type OAuth struct {
	Issuer             string    `json:"issuer"`
	ClientID           string    `json:"client_id"`
	TokenEndpoint      string    `json:"token_endpoint"`
	RevocationEndpoint string    `json:"revocation_endpoint,omitempty"`
	Resource           string    `json:"resource,omitempty"`
	RefreshToken       string    `json:"refresh_token,omitempty"`
	ExpiresAt          time.Time `json:"expires_at,omitzero"`
}

// DefaultPath is <user config dir>/berth/config.json.
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user config directory (pass --config): %w", err)
	}
	return filepath.Join(dir, "berth", "config.json"), nil
}

// NormalizeURL checks that raw is an http(s) base URL and returns it
// without a trailing slash, so that URL+"/api/..." is always right.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", wire.Errorf(wire.CodeBadRequest, "server URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parse error quotes the URL, which may hold a password.
		return "", wire.Errorf(wire.CodeBadRequest, "server URL is not a valid URL")
	}
	shown := u.Redacted()
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", wire.Errorf(wire.CodeBadRequest, "server URL %q: want http:// or https://", shown)
	}
	if u.Host == "" {
		return "", wire.Errorf(wire.CodeBadRequest, "server URL %q has no host", shown)
	}
	// Credentials belong in the token, and a query or fragment would be
	// mangled by appending paths.
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", wire.Errorf(wire.CodeBadRequest, "server URL %q: give only scheme, host and path (no user info, query or fragment)", shown)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Validate reports what is missing or malformed in c.
func (c Config) Validate() error {
	if _, err := NormalizeURL(c.URL); err != nil {
		return err
	}
	if strings.TrimSpace(c.Token) == "" {
		return wire.Errorf(wire.CodeBadRequest, "token is empty")
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return wire.Errorf(wire.CodeBadRequest, "token contains whitespace")
	}
	if o := c.OAuth; o != nil {
		if o.ClientID == "" || o.TokenEndpoint == "" {
			return wire.Errorf(wire.CodeBadRequest, "OAuth login without a client id or token endpoint")
		}
		if strings.ContainsAny(o.RefreshToken, " \t\r\n") {
			return wire.Errorf(wire.CodeBadRequest, "refresh token contains whitespace")
		}
	}
	return nil
}

// Load reads the credentials at path; ErrNotLoggedIn when there are none.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, ErrNotLoggedIn
	}
	if err != nil {
		return Config{}, fmt.Errorf("read %s: %w", path, err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("read %s: not valid JSON (log in again to rewrite it): %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("read %s: %w (log in again to rewrite it)", path, err)
	}
	return c, nil
}

// Save writes c to path: the directory is created 0700, the file is
// 0600 and replaced atomically (written to a temporary file in the same
// directory, synced, then renamed over the old one).
func Save(path string, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already makes the file 0600; Chmod keeps that true even
	// if a future Go changes the default.
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	done = true
	return nil
}

// Remove deletes the saved credentials; it reports whether there were
// any.
func Remove(path string) (bool, error) {
	err := os.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove %s: %w", path, err)
	}
	return true, nil
}
