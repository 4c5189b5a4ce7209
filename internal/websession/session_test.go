package websession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/websession"
)

// clock is a test clock that can be moved forward.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func newSessions(t *testing.T, secure bool) (*websession.Sessions, *store.Store, *clock) {
	t.Helper()
	st := storetest.New(t)
	c := &clock{}
	m, err := websession.New(websession.Options{Store: st, Secure: secure, TTL: time.Hour, Origin: "https://berth.example", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return m, st, c
}

func newUser(t *testing.T, st *store.Store, name string) store.User {
	t.Helper()
	u, _, err := st.EnsureUser(context.Background(), store.NewUser{Username: name}, "admin", "member", "default")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// signIn starts a session for u and returns a request carrying its cookie.
func signIn(t *testing.T, m *websession.Sessions, u store.User) (*websession.Session, *http.Request, *http.Cookie) {
	t.Helper()
	rec := httptest.NewRecorder()
	s, err := m.Start(t.Context(), rec, u.ID, u.Username)
	if err != nil {
		t.Fatal(err)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("Start set %d cookies", len(cookies))
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(cookies[0])
	return s, r, cookies[0]
}

func TestSessions(t *testing.T) {
	m, st, clk := newSessions(t, false)
	alice, bob := newUser(t, st, "alice"), newUser(t, st, "bob")
	s, r, c := signIn(t, m, alice)
	if c.Name != "berth_session" || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" ||
		!strings.HasPrefix(c.Value, "berth_bs_") {
		t.Fatalf("session cookie %+v", c)
	}
	got, err := m.Get(r)
	if err != nil || got == nil || got.UserID != alice.ID || got.Username != "alice" {
		t.Fatalf("Get: %+v %v", got, err)
	}
	// Only the hash is stored.
	var hashed, clear int
	if err := st.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE token_hash = sha256($1::bytea)),
		count(*) FILTER (WHERE token_hash = $1::bytea) FROM oauth_browser_sessions`, []byte(c.Value)).Scan(&hashed, &clear); err != nil ||
		hashed != 1 || clear != 0 {
		t.Fatalf("stored: %d by hash, %d in clear (%v)", hashed, clear, err)
	}
	var n int

	// CSRF tokens of one session are refused for another.
	_, rb, _ := signIn(t, m, bob)
	sb, err := m.Get(rb)
	if err != nil || sb == nil {
		t.Fatalf("bob's session: %v", err)
	}
	tok := m.CSRF(s, "account")
	if err := m.CheckCSRF(got, tok, "account"); err != nil {
		t.Fatalf("own token refused: %v", err)
	}
	if err := m.CheckCSRF(sb, tok, "account"); !errors.Is(err, websession.ErrCSRFInvalid) {
		t.Fatalf("alice's token on bob's session: %v", err)
	}
	if s.MAC("x", "q") == sb.MAC("x", "q") {
		t.Fatal("two sessions make the same MAC")
	}

	// Junk and unknown cookies are no session, without an error.
	for _, v := range []string{"", "junk", "berth_bs_" + strings.Repeat("A", 43), c.Value + "A"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: "berth_session", Value: v})
		if got, err := m.Get(r); got != nil || err != nil {
			t.Errorf("cookie %q: %+v %v", v, got, err)
		}
	}
	// A disabled user has no session.
	if _, err := st.SetUserDisabled(t.Context(), bob.ID, true); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(rb); got != nil || err != nil {
		t.Fatalf("disabled user's session: %+v %v", got, err)
	}

	// End clears the cookie and the session.
	rec := httptest.NewRecorder()
	if err := m.End(t.Context(), rec, got); err != nil {
		t.Fatal(err)
	}
	if cs := rec.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Fatalf("End did not clear the cookie: %+v", cs)
	}
	if got, err := m.Get(r); got != nil || err != nil {
		t.Fatalf("ended session: %+v %v", got, err)
	}

	// Sessions expire; the CSRF tokens of forms sooner (FormTTL, 1 h by
	// default, the session's TTL here too).
	s2, r2, _ := signIn(t, m, alice)
	tok = m.CSRF(s2, "consent", "request")
	clk.advance(time.Hour + time.Second)
	if err := m.CheckCSRF(s2, tok, "consent", "request"); !errors.Is(err, websession.ErrCSRFExpired) {
		t.Fatalf("an hour-old form: %v", err)
	}
	if got, err := m.Get(r2); got != nil || err != nil {
		t.Fatalf("expired session: %+v %v", got, err)
	}
	// Starting a session prunes the expired ones.
	signIn(t, m, alice)
	if err := st.Pool.QueryRow(t.Context(), `SELECT count(*) FROM oauth_browser_sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d sessions stored, want the one live session (%v)", n, err)
	}
}

func TestSecureCookies(t *testing.T) {
	m, st, _ := newSessions(t, true)
	_, r, c := signIn(t, m, newUser(t, st, "carol"))
	if c.Name != "__Host-berth_session" || !c.Secure {
		t.Fatalf("cookie over https: %+v", c)
	}
	if got, err := m.Get(r); err != nil || got == nil {
		t.Fatalf("Get over https: %+v %v", got, err)
	}
	// A cookie without the prefix (set by a sibling domain) is ignored.
	plain := httptest.NewRequest("GET", "/", nil)
	plain.AddCookie(&http.Cookie{Name: "berth_session", Value: c.Value})
	if got, _ := m.Get(plain); got != nil {
		t.Fatal("an unprefixed cookie was taken over https")
	}
}

func TestFormKey(t *testing.T) {
	m, _, _ := newSessions(t, false)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/login", nil)
	key, err := m.FormKey(rec, r, "berth_login", time.Minute)
	if err != nil || !strings.HasPrefix(key, "berth_lc_") {
		t.Fatalf("FormKey: %q %v", key, err)
	}
	cs := rec.Result().Cookies()
	if len(cs) != 1 || cs[0].Value != key || !cs[0].HttpOnly {
		t.Fatalf("form key cookie: %+v", cs)
	}
	r2 := httptest.NewRequest("POST", "/login", nil)
	r2.AddCookie(cs[0])
	if m.FormKeyOf(r2, "berth_login") != key {
		t.Fatal("FormKeyOf does not read the key back")
	}
	rec2 := httptest.NewRecorder()
	if again, _ := m.FormKey(rec2, r2, "berth_login", time.Minute); again != key || len(rec2.Result().Cookies()) != 0 {
		t.Fatal("FormKey replaced an existing key")
	}
	forged := httptest.NewRequest("POST", "/login", nil)
	forged.AddCookie(&http.Cookie{Name: "berth_login", Value: "chosen-by-attacker"})
	if m.FormKeyOf(forged, "berth_login") != "" {
		t.Fatal("a malformed form key was accepted")
	}
}

func TestCheckOrigin(t *testing.T) {
	m, _, _ := newSessions(t, false)
	post := func(h map[string]string) error {
		r := httptest.NewRequest("POST", "http://berth.test/oauth/authorize", nil)
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return m.CheckOrigin(r)
	}
	for name, h := range map[string]map[string]string{
		"no browser headers": nil,
		"same origin":        {"Sec-Fetch-Site": "same-origin", "Origin": "http://berth.test"},
		"typed by the user":  {"Sec-Fetch-Site": "none"},
		"origin only":        {"Origin": "http://berth.test"},
		// The public origin, the Host rewritten by a reverse proxy.
		"public origin": {"Origin": "https://berth.example"},
	} {
		if err := post(h); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for name, h := range map[string]map[string]string{
		"cross site":         {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"same site":          {"Sec-Fetch-Site": "same-site", "Origin": "http://other.berth.test"},
		"foreign origin":     {"Origin": "https://evil.example"},
		"opaque origin null": {"Origin": "null"},
	} {
		if err := post(h); err == nil || !strings.Contains(err.Error(), "another site") {
			t.Errorf("%s: accepted or unclear: %v", name, err)
		}
	}
}
