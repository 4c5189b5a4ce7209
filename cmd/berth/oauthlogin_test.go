package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/syncbuf"
)

// startOAuthServer runs a real orchestrator with the authentication
// `berth serve` sets up on loopback (setupAuth: the built-in authorization
// server with the development login), REST and /mcp, on a loopback port.
func startOAuthServer(t *testing.T) (string, *orchtest.Env) {
	t.Helper()
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	// The first user becomes admin; keep the test users ordinary members.
	if _, _, err := e.Svc.EnsureUser(context.Background(), store.NewUser{Username: "root"}); err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("k", 32))
	url := orchtest.Serve(t, func(url string) http.Handler {
		setup, err := setupAuth(context.Background(), authFlags{mode: "builtin"}, url, strings.TrimPrefix(url, "http://"),
			e.Store, e.Svc, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		hosts := hostguard.Options{PublicURL: url}
		mcpH := mcpserver.New(e.Svc, mcpserver.Options{Auth: setup.middleware, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
		return api.NewServer(e.Svc, api.Options{Auth: setup.middleware, Hosts: hosts, MCP: mcpH, OAuth: setup.handler})
	})
	return url, e
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// fakeBrowser drives berth's login and consent pages as a browser would:
// it follows berth's redirects, signs in with the development login as
// user and approves. It stops at the redirect to the CLI's loopback
// address and returns it; follow also loads it, as a browser on the
// same machine does.
func fakeBrowser(t *testing.T, base, user, authURL string, follow bool) (*url.URL, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	next, _ := http.NewRequest("GET", authURL, nil)
	for range 10 {
		resp, err := c.Do(next)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		form := func(action string) url.Values {
			v := url.Values{}
			for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
				v.Set(m[1], html.UnescapeString(m[2]))
			}
			return v
		}
		post := func(path string, v url.Values) *http.Request {
			r, _ := http.NewRequest("POST", base+path, strings.NewReader(v.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", base)
			return r
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(loc.String(), base) {
				if follow {
					r, err := http.Get(loc.String())
					if err != nil {
						return loc, err
					}
					r.Body.Close()
				}
				return loc, nil
			}
			next, _ = http.NewRequest("GET", loc.String(), nil)
		case resp.StatusCode == 200 && strings.Contains(page, `action="/oauth/login"`):
			v := form("/oauth/login")
			v.Set("username", user)
			next = post("/oauth/login", v)
		case resp.StatusCode == 200 && strings.Contains(page, `action="/oauth/authorize"`):
			v := form("/oauth/authorize")
			v.Set("decision", "approve")
			next = post("/oauth/authorize", v)
		default:
			t.Errorf("the login ended on %d: %.400s", resp.StatusCode, page)
			return nil, nil
		}
	}
	t.Error("too many steps in the login")
	return nil, nil
}

// waitFor polls s until it matches re or the deadline passes.
func waitFor(t *testing.T, s func() string, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(s()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s in %q", re, s())
	return nil
}

// browserLogin runs `berth login --url base` with a browser that signs
// in as user.
func browserLogin(t *testing.T, base, user string, args ...string) result {
	t.Helper()
	var out, errOut syncbuf.Buffer
	opened := make(chan string, 1)
	e := &env{getenv: envMap(), stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, openBrowser: func(u string) error {
		opened <- u
		go fakeBrowser(t, base, user, u, true)
		return nil
	}}
	err := runEnv(context.Background(), e, append([]string{"login", "--url", base}, args...))
	select {
	case u := <-opened:
		if !strings.Contains(errOut.String(), u) {
			t.Errorf("login did not also print the URL it opened")
		}
	default:
		t.Errorf("login did not open a browser")
	}
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

func TestOAuthLogin(t *testing.T) {
	isolateHome(t)
	base, _ := startOAuthServer(t)
	path := filepath.Join(t.TempDir(), "config.json")

	r := browserLogin(t, base, "alice", "--config", path)
	if r.err != nil {
		t.Fatalf("login: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "as alice") {
		t.Errorf("login said %q", r.stdout)
	}
	c, err := cliconfig.Load(path)
	if err != nil || c.OAuth == nil || c.OAuth.RefreshToken == "" || c.OAuth.ExpiresAt.IsZero() {
		t.Fatalf("saved %+v, %v; want access and refresh tokens with an expiry", c.OAuth, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", fi.Mode().Perm())
	}
	if strings.Contains(r.stdout+r.stderr, c.Token) || strings.Contains(r.stdout+r.stderr, c.OAuth.RefreshToken) {
		t.Error("login printed a token")
	}
	getenv := envMap()
	if w := berth(t, getenv, nil, "whoami", "--config", path); w.err != nil || !strings.Contains(w.stdout, "user:       alice") {
		t.Fatalf("whoami: %v %q", w.err, w.stdout)
	}

	t.Run("an expired access token is refreshed and saved", func(t *testing.T) {
		c, _ := cliconfig.Load(path)
		old := c.Token
		c.OAuth.ExpiresAt = time.Now().Add(-time.Minute)
		if err := cliconfig.Save(path, c); err != nil {
			t.Fatal(err)
		}
		w := berth(t, getenv, nil, "whoami", "--config", path)
		if w.err != nil || !strings.Contains(w.stdout, "alice") {
			t.Fatalf("whoami with an expired token: %v", w.err)
		}
		n, _ := cliconfig.Load(path)
		if n.Token == old || n.OAuth.RefreshToken == c.OAuth.RefreshToken || !n.OAuth.ExpiresAt.After(time.Now()) {
			t.Errorf("the refreshed tokens were not saved")
		}
	})

	t.Run("processes refreshing at once do not lose the login", func(t *testing.T) {
		c, _ := cliconfig.Load(path)
		c.OAuth.ExpiresAt = time.Now().Add(-time.Minute)
		cliconfig.Save(path, c)
		// Each run loads the file and refreshes on its own, as separate
		// berth processes do; a refresh token used twice would revoke
		// the whole login.
		errs := make(chan error, 4)
		for range 4 {
			go func() { errs <- berth(t, getenv, nil, "whoami", "--config", path).err }()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("a concurrent whoami: %v", err)
			}
		}
		if w := berth(t, getenv, nil, "whoami", "--config", path); w.err != nil {
			t.Fatalf("the login is lost after concurrent refreshes: %v", w.err)
		}
	})

	t.Run("a token the server refuses is refreshed", func(t *testing.T) {
		c, _ := cliconfig.Load(path)
		c.Token = oauth.AccessTokenPrefix + strings.Repeat("x", 43) // looks right, is unknown
		cliconfig.Save(path, c)
		if w := berth(t, getenv, nil, "token", "list", "--remote", "--config", path); w.err != nil {
			t.Fatalf("a refused access token was not refreshed: %v", w.err)
		}
	})

	t.Run("a refresh that fails says to log in again", func(t *testing.T) {
		c, _ := cliconfig.Load(path)
		bad := c
		o := *c.OAuth
		o.RefreshToken, o.ExpiresAt = oauth.RefreshTokenPrefix+strings.Repeat("y", 43), time.Now().Add(-time.Minute)
		bad.OAuth = &o
		other := filepath.Join(t.TempDir(), "c.json")
		cliconfig.Save(other, bad)
		w := berth(t, getenv, nil, "whoami", "--config", other)
		if w.err == nil || !strings.Contains(w.err.Error(), "run berth login again") {
			t.Fatalf("whoami with a dead refresh token: %v", w.err)
		}
	})

	t.Run("a new login revokes the one it replaces", func(t *testing.T) {
		old, _ := cliconfig.Load(path)
		if r := browserLogin(t, base, "alice", "--config", path); r.err != nil {
			t.Fatalf("second login: %v", r.err)
		}
		if code := statusWith(t, base, old.Token); code != http.StatusUnauthorized {
			t.Errorf("the replaced login's access token still works: %d", code)
		}
	})

	t.Run("logout revokes the grant", func(t *testing.T) {
		c, _ := cliconfig.Load(path)
		w := berth(t, getenv, nil, "logout", "--config", path)
		if w.err != nil || !strings.Contains(w.stdout, "revoked") {
			t.Fatalf("logout: %v %q %q", w.err, w.stdout, w.stderr)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Error("logout left the config")
		}
		if code := statusWith(t, base, c.Token); code != http.StatusUnauthorized {
			t.Errorf("the access token works after logout: %d", code)
		}
	})
}

// statusWith is the status of GET /api/whoami with token.
func statusWith(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOAuthLoginPaste is the login over ssh: the browser cannot reach
// the CLI's loopback, so the user pastes the address it ended on.
func TestOAuthLoginPaste(t *testing.T) {
	isolateHome(t)
	base, _ := startOAuthServer(t)
	path := filepath.Join(t.TempDir(), "config.json")
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var out, errOut syncbuf.Buffer
	e := &env{getenv: envMap(), stdin: stdinR, stdout: &out, stderr: &errOut, openBrowser: func(string) error {
		t.Error("--no-browser opened a browser")
		return nil
	}}
	done := make(chan error, 1)
	go func() {
		done <- runEnv(context.Background(), e, []string{"login", "--url", base, "--no-browser", "--config", path})
	}()
	m := waitFor(t, errOut.String, regexp.MustCompile(`(http://\S+/oauth/authorize\?\S+)`))
	loc, err := fakeBrowser(t, base, "bob", m[1], false)
	if err != nil || loc == nil {
		t.Fatalf("browser: %v", err)
	}
	if loc.Hostname() != "127.0.0.1" || loc.Query().Get("code") == "" {
		t.Fatalf("the login redirected to %s, want the CLI's loopback with a code", loc)
	}
	io.WriteString(stdinW, loc.String()+"\n")
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "as bob") {
		t.Errorf("login said %q", out.String())
	}
}

// TestOAuthLoginRefusesForgedRedirect: another local process calling the
// CLI's loopback without the login's state does not end the login.
func TestOAuthLoginRefusesForgedRedirect(t *testing.T) {
	isolateHome(t)
	base, _ := startOAuthServer(t)
	path := filepath.Join(t.TempDir(), "config.json")
	var out, errOut syncbuf.Buffer
	e := &env{getenv: envMap(), stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, openBrowser: func(u string) error {
		go func() {
			au, _ := url.Parse(u)
			cb := au.Query().Get("redirect_uri")
			resp, err := http.Get(cb + "?code=forged&state=guess")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("the forged redirect got %d, want 400", resp.StatusCode)
			}
			fakeBrowser(t, base, "carol", u, true)
		}()
		return nil
	}}
	if err := runEnv(context.Background(), e, []string{"login", "--url", base, "--config", path}); err != nil {
		t.Fatalf("login after a forged redirect: %v", err)
	}
	if !strings.Contains(out.String(), "as carol") {
		t.Errorf("login said %q", out.String())
	}
}

func TestOAuthLoginWithoutOAuth(t *testing.T) {
	isolateHome(t)
	base, _ := startServer(t) // session tokens only
	r := berth(t, envMap(), nil, "login", "--url", base, "--config", filepath.Join(t.TempDir(), "c.json"))
	if r.err == nil || !strings.Contains(r.err.Error(), "--token") {
		t.Fatalf("login on a berth without OAuth: %v, want a pointer to --token", r.err)
	}
}

func TestLoginHelpPlaceholder(t *testing.T) {
	r := berth(t, envMap(), nil, "login", "--help")
	if strings.Contains(r.stdout, "--token berth token create") || !strings.Contains(r.stdout, "--token string") {
		t.Errorf("login --help shows the --token flag as:\n%s", r.stdout)
	}
}

// TestBinaryLoginAndExec is the user's path with the real binaries: a
// `berth serve` (the development login on loopback), `berth login` over
// a pipe with --no-browser and the redirected address pasted back, then
// `berth start` and `berth exec` with the saved browser login, exiting
// with the command's exit code.
func TestBinaryLoginAndExec(t *testing.T) {
	bin := buildBerth(t)
	srv := startServe(t, bin, embeddedDataDir(t))
	cfg := filepath.Join(t.TempDir(), "config.json")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}

	login := exec.Command(bin, "login", "--url", srv.url, "--no-browser", "--config", cfg)
	login.Env = env
	stdin, err := login.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncbuf.Buffer
	login.Stdout, login.Stderr = &stdout, &stderr
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- login.Wait() }()
	t.Cleanup(func() { login.Process.Kill() })
	m := waitFor(t, stderr.String, regexp.MustCompile(`(http://\S+/oauth/authorize\?\S+)`))
	loc, err := fakeBrowser(t, srv.url, "dana", m[1], false)
	if err != nil || loc == nil {
		t.Fatalf("browser: %v", err)
	}
	io.WriteString(stdin, loc.String()+"\n")
	if err := <-done; err != nil || !strings.Contains(stdout.String(), "as dana") {
		t.Fatalf("berth login: %v %q %q", err, stdout.String(), stderr.String())
	}
	sid := berthCommandEnv(t, bin, env, "start", "base", "--config", cfg)
	cmd := exec.Command(bin, "exec", sid, "--config", cfg, "--", "whoami >/dev/null; echo from-$((6*7)); exit 5")
	cmd.Env = env
	var execErr strings.Builder
	cmd.Stderr = &execErr
	out, err := cmd.Output()
	var ee *exec.ExitError
	// The process exits with the command's code and adds nothing.
	if !errors.As(err, &ee) || ee.ExitCode() != 5 || string(out) != "from-42\n" || execErr.String() != "" {
		t.Fatalf("berth exec: %v %q %q, want exit code 5", err, out, execErr.String())
	}
	berthCommandEnv(t, bin, env, "stop", sid, "--config", cfg)
}

// TestOAuthLoginRefusesHostileMetadata: a server that names a non-web
// authorization endpoint does not get it opened on the desktop.
func TestOAuthLoginRefusesHostileMetadata(t *testing.T) {
	isolateHome(t)
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("/api/whoami", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, base, base)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":"file:///etc/passwd","token_endpoint":%q,
			"registration_endpoint":%q,"code_challenge_methods_supported":["S256"]}`, base, base+"/t", base+"/r")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL
	e := &env{getenv: envMap(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, openBrowser: func(u string) error {
		t.Errorf("opened %s", u)
		return nil
	}}
	err := runEnv(context.Background(), e, []string{"login", "--url", base, "--config", filepath.Join(t.TempDir(), "c.json")})
	if err == nil || !strings.Contains(err.Error(), "file:///etc/passwd") {
		t.Fatalf("login with a file: authorization endpoint: %v", err)
	}
}
