package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/version"
)

// The OAuth login of `berth login --url U`: the native-app flow of RFC
// 8252 against berth's authorization server, found the way an MCP client
// finds it (the resource's 401 challenge or its RFC 9728 metadata, then
// RFC 8414 metadata), with a public client registered by RFC 7591, PKCE
// S256, state, and the code received on a loopback redirect, or pasted
// back when the browser runs where the loopback cannot be reached.

// oauthDiscovery is what the login found out about the server.
type oauthDiscovery struct {
	Resource                      string   `json:"-"`
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	RevocationEndpoint            string   `json:"revocation_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	IssParameterSupported         bool     `json:"authorization_response_iss_parameter_supported"`
}

var resourceMetadataParam = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// discover finds the authorization server of the berth at base.
func discover(ctx context.Context, hc *http.Client, base string) (oauthDiscovery, error) {
	var d oauthDiscovery
	metaURL := base + "/.well-known/oauth-protected-resource"
	// The challenge of an unauthenticated call names the metadata; it
	// also proves that base is a berth that wants a token.
	if resp, err := get(ctx, hc, base+"/api/whoami"); err != nil {
		return d, fmt.Errorf("cannot reach berth at %s: %w", base, err)
	} else {
		resp.Body.Close()
		if m := resourceMetadataParam.FindStringSubmatch(resp.Header.Get("WWW-Authenticate")); resp.StatusCode == http.StatusUnauthorized && m != nil {
			metaURL = m[1]
		}
	}
	var rm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := getJSON(ctx, hc, metaURL, &rm); err != nil {
		return d, fmt.Errorf("%s offers no OAuth login (%v): log in with --token (from berth token create) instead", base, err)
	}
	if strings.TrimRight(rm.Resource, "/") != base && strings.TrimRight(rm.Resource, "/") != base+"/mcp" {
		return d, fmt.Errorf("the protected resource metadata at %s is for %q, not %s: check --url", metaURL, rm.Resource, base)
	}
	if len(rm.AuthorizationServers) == 0 {
		return d, fmt.Errorf("the protected resource metadata at %s names no authorization server", metaURL)
	}
	issuer := strings.TrimRight(rm.AuthorizationServers[0], "/")
	if err := getJSON(ctx, hc, wellKnown(issuer, "oauth-authorization-server"), &d); err != nil {
		return d, fmt.Errorf("authorization server %s: %w", issuer, err)
	}
	switch {
	case strings.TrimRight(d.Issuer, "/") != issuer:
		return d, fmt.Errorf("authorization server metadata of %s names issuer %q", issuer, d.Issuer)
	case d.AuthorizationEndpoint == "" || d.TokenEndpoint == "":
		return d, fmt.Errorf("authorization server %s has no authorization or token endpoint", issuer)
	case d.RegistrationEndpoint == "":
		return d, fmt.Errorf("authorization server %s does not register clients (no registration_endpoint): log in with --token instead", issuer)
	case !slices.Contains(d.CodeChallengeMethodsSupported, "S256"):
		return d, fmt.Errorf("authorization server %s does not support PKCE S256", issuer)
	}
	// The authorization URL is opened in the browser and tokens go to
	// the others: only web URLs, never a scheme that starts a local
	// program, and plain http only on loopback or the host the user
	// chose to reach over http.
	baseHost := ""
	if bu, err := url.Parse(base); err == nil {
		baseHost = bu.Host
	}
	for _, u := range []string{d.AuthorizationEndpoint, d.TokenEndpoint, d.RegistrationEndpoint, d.RevocationEndpoint} {
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		web := err == nil && pu.Host != "" && (pu.Scheme == "https" || pu.Scheme == "http" && (!plainRemote(u) || pu.Host == baseHost))
		if !web {
			return d, fmt.Errorf("authorization server %s names the endpoint %q: want an https URL (http only on loopback or %s)", issuer, u, baseHost)
		}
	}
	d.Issuer = issuer
	d.Resource = strings.TrimRight(rm.Resource, "/")
	return d, nil
}

// wellKnown is the RFC 8414 metadata URL of issuer: the well-known path
// goes between the host and the issuer's path.
func wellKnown(issuer, name string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return issuer + "/.well-known/" + name
	}
	u.Path = "/.well-known/" + name + strings.TrimRight(u.Path, "/")
	return u.String()
}

func get(ctx context.Context, hc *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return hc.Do(req)
}

func getJSON(ctx context.Context, hc *http.Client, u string, out any) error {
	resp, err := get(ctx, hc, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: not JSON metadata: %w", u, err)
	}
	return nil
}

// register registers berth as a public native client for redirectURI.
func register(ctx context.Context, hc *http.Client, d oauthDiscovery, redirectURI string) (string, error) {
	host, _ := os.Hostname()
	name := "berth CLI"
	if host != "" {
		name += " on " + host
	}
	b, _ := json.Marshal(map[string]any{
		"client_name": name, "redirect_uris": []string{redirectURI}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"software_id": "berth-cli", "software_version": version.Version,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.RegistrationEndpoint, strings.NewReader(string(b)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("register the berth CLI at %s: %w", d.RegistrationEndpoint, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("register the berth CLI: %w", oauthAnswerError(d.RegistrationEndpoint, resp.StatusCode, raw))
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if json.Unmarshal(raw, &reg) != nil || reg.ClientID == "" {
		return "", fmt.Errorf("register the berth CLI: %s answered without a client_id", d.RegistrationEndpoint)
	}
	return reg.ClientID, nil
}

// randomString is n random bytes, base64url without padding.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loginOptions are the flags of an OAuth login.
type loginOptions struct {
	scopes    []string
	noBrowser bool
	timeout   time.Duration
}

// oauthLogin runs the flow against base and returns the credentials.
func oauthLogin(ctx context.Context, e *env, base string, o loginOptions) (cliconfig.Config, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	d, err := discover(ctx, hc, base)
	if err != nil {
		return cliconfig.Config{}, err
	}
	// The loopback listener is up before the browser is sent there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return cliconfig.Config{}, fmt.Errorf("listen on loopback for the login redirect: %w", err)
	}
	defer ln.Close()
	redirectURI := "http://" + ln.Addr().String() + "/callback"
	clientID, err := register(ctx, hc, d, redirectURI)
	if err != nil {
		return cliconfig.Config{}, err
	}
	verifier := randomString(32)
	sum := sha256.Sum256([]byte(verifier))
	state := randomString(16)
	q := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"state": {state}, "resource": {d.Resource}, "scope": {strings.Join(o.scopes, " ")},
	}
	authURL := d.AuthorizationEndpoint + "?" + q.Encode()

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	answers := make(chan url.Values, 2)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: callbackHandler(state, answers)}
	go srv.Serve(ln)
	defer srv.Close()

	paste := o.noBrowser
	if !paste {
		if err := e.openBrowser(authURL); err != nil {
			fmt.Fprintf(e.stderr, "could not open a browser (%v)\n", err)
			paste = true
		} else {
			fmt.Fprintf(e.stderr, "Opened your browser to log in to %s. If it did not open, visit:\n\n  %s\n\n", base, authURL)
		}
	}
	if paste {
		fmt.Fprintf(e.stderr, "Open this URL in a browser to log in to %s:\n\n  %s\n\n"+
			"If that browser cannot reach this machine, it ends on a page that does not load: "+
			"paste that page's address (or just its code) here and press Enter.\n", base, authURL)
		go readPasted(ctx, e.stdin, answers)
	}
	var got url.Values
	select {
	case got = <-answers:
	case <-ctx.Done():
		return cliconfig.Config{}, fmt.Errorf("login: no answer from the browser within %s (--timeout)", o.timeout)
	}
	code, err := checkAnswer(got, state, d)
	if err != nil {
		return cliconfig.Config{}, err
	}
	tr, err := requestToken(ctx, hc, d.TokenEndpoint, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
		"client_id": {clientID}, "code_verifier": {verifier}, "resource": {d.Resource},
	})
	if err != nil {
		return cliconfig.Config{}, fmt.Errorf("login: exchange the code: %w", err)
	}
	return cliconfig.Config{URL: base, Token: tr.AccessToken, OAuth: &cliconfig.OAuth{
		Issuer: d.Issuer, ClientID: clientID, TokenEndpoint: d.TokenEndpoint, RevocationEndpoint: d.RevocationEndpoint,
		Resource: d.Resource, RefreshToken: tr.RefreshToken, ExpiresAt: tr.expiry(time.Now()),
	}}, nil
}

// checkAnswer checks the authorization response and returns its code.
func checkAnswer(got url.Values, state string, d oauthDiscovery) (string, error) {
	if e := got.Get("error"); e != "" {
		if desc := got.Get("error_description"); desc != "" {
			e += ": " + desc
		}
		return "", fmt.Errorf("login refused by %s: %s", d.Issuer, e)
	}
	// A pasted bare code has no state to check; everything that came
	// through a URL must carry ours.
	if !got.Has("pasted_code") {
		if subtle.ConstantTimeCompare([]byte(got.Get("state")), []byte(state)) != 1 {
			return "", errors.New("login: the redirect carried the wrong state (a stale or forged login): run berth login again")
		}
		if iss := got.Get("iss"); (iss != "" || d.IssParameterSupported) && strings.TrimRight(iss, "/") != d.Issuer {
			return "", fmt.Errorf("login: the redirect came from issuer %q, not %s", iss, d.Issuer)
		}
	}
	code := got.Get("code")
	if code == "" {
		code = got.Get("pasted_code")
	}
	if code == "" {
		return "", errors.New("login: the redirect carried no code")
	}
	return code, nil
}

// callbackHandler receives the browser's redirect on the loopback. Any
// local process can call it, so a request without the login's state is
// turned away without ending the login.
func callbackHandler(state string, answers chan<- url.Values) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/callback" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "not this login's redirect", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		msg := "You are logged in to berth. You can close this window and go back to the terminal."
		if e := q.Get("error"); e != "" {
			msg = "The login was not completed: " + e + ". Go back to the terminal."
		}
		fmt.Fprintf(w, "<!doctype html><title>berth login</title><p>%s</p>\n", html.EscapeString(msg))
		select {
		case answers <- q:
		default:
		}
	})
}

// readPasted reads the redirected URL, or the code alone, from stdin.
func readPasted(ctx context.Context, r io.Reader, answers chan<- url.Values) {
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() && ctx.Err() == nil {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var q url.Values
		if u, err := url.Parse(line); err == nil && u.RawQuery != "" {
			q = u.Query()
		} else if strings.Contains(line, "code=") {
			q, _ = url.ParseQuery(strings.TrimPrefix(line, "?"))
		} else {
			q = url.Values{"pasted_code": {line}}
		}
		select {
		case answers <- q:
		default:
		}
		return
	}
}

// openBrowser opens u in the desktop's browser.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	case "darwin":
		cmd = exec.Command("open", u)
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no graphical session (neither DISPLAY nor WAYLAND_DISPLAY is set)")
		}
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it; the browser outlives berth
	return nil
}
