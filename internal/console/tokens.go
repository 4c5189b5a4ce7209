package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// The tokens page: create a session token (shown once, with ready-made
// client configurations), list and revoke. Every rule (scopes no wider
// than the user's, lifetimes, who may see and revoke what) is the
// service's; the page only offers what the service will accept.

func (c *Console) tokenRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /tokens", c.signedIn(c.tokensPage))
	mux.HandleFunc("POST /tokens", c.form(c.createToken))
	mux.HandleFunc("POST /tokens/{id}/revoke", c.form(c.revokeToken))
}

// scopeWords says what each scope lets a token do.
var scopeWords = map[rbac.Scope]string{
	rbac.ScopeRead:  "berth:read: see your clients, servers and operations",
	rbac.ScopeWrite: "berth:write: start, stop and change clients and servers",
	rbac.ScopeExec:  "berth:exec: run commands and edit files in your sandboxes",
	rbac.ScopeAdmin: "berth:admin: administer users, roles and everyone's tokens",
}

// tokenData fills the page's form and lists for v.
func (c *Console) tokenData(r *http.Request, v *Visit, d web.Tokens) (web.Tokens, error) {
	mcpURL := c.opts.PublicURL + "/mcp"
	d.MCPURL = mcpURL
	d.OAuthConfigs = oauthConfigs(mcpURL)
	d.Admin = v.Principal.IsAdmin("")
	d.All = d.Admin && r.URL.Query().Get("all") != ""
	list, err := c.svc.ListMyTokens(r.Context(), v.Principal, orchestrator.ListTokensInput{All: d.All})
	if err != nil {
		return d, err
	}
	for _, t := range list.Tokens {
		row := web.TokenRow{
			ID: t.ID, Name: t.Name, Prefix: t.Prefix, Username: t.Username, State: t.State, Scopes: t.Scopes,
			Created: t.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), Expires: "never", LastUsed: "never",
			Revocable: t.State == orchestrator.TokenActive,
		}
		if t.ExpiresAt != nil {
			row.Expires = t.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		if t.LastUsedAt != nil {
			row.LastUsed = t.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		d.Tokens = append(d.Tokens, row)
	}
	if d.Scopes == nil {
		d.Scopes = scopeChoices(v, func(sc rbac.Scope) bool { return sc != rbac.ScopeAdmin })
	}
	if d.Lifetimes == nil {
		d.Lifetimes = c.lifetimes(0)
	}
	return d, nil
}

// scopeChoices are the scopes the user's roles can use, as checkboxes,
// those selected ticked. The service decides what a token may hold; the
// form only offers nothing it would refuse for want of a role.
func scopeChoices(v *Visit, selected func(rbac.Scope) bool) []web.Choice {
	var out []web.Choice
	for _, sc := range rbac.UsableScopes(v.Principal.Bindings) {
		out = append(out, web.Choice{Value: string(sc), Label: scopeWords[sc], Selected: selected(sc)})
	}
	return out
}

// lifetimes are the expiry choices the server allows, the default (or
// chosen) one selected.
func (c *Console) lifetimes(chosen time.Duration) []web.Choice {
	limits := c.svc.TokenLimits()
	if chosen == 0 {
		chosen = limits.Default
	}
	var out []web.Choice
	for _, n := range []int{1, 7, 30, 90, 365} {
		d := time.Duration(n) * 24 * time.Hour
		if d > limits.Max {
			break
		}
		out = append(out, web.Choice{Value: strconv.FormatInt(int64(d/time.Second), 10), Label: dayLabel(n), Selected: d == chosen})
	}
	if !slices.ContainsFunc(out, func(ch web.Choice) bool { return ch.Selected }) {
		// The server's default or maximum is not a round choice: offer
		// it as it is.
		out = append(out, web.Choice{Value: strconv.FormatInt(int64(chosen/time.Second), 10), Label: days(chosen), Selected: true})
	}
	return out
}

func dayLabel(n int) string {
	if n == 1 {
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}

func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	d := web.Tokens{}
	if r.URL.Query().Get("revoked") != "" {
		d.Notice = "Token revoked. Clients using it are refused from now on."
	}
	d, err := c.tokenData(r, v, d)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, web.PageTokens, "tokens", "Tokens", d)
}

// createToken answers with the page itself (not a redirect), so the
// secret is shown once and is in no URL or history entry; the page is
// no-store.
func (c *Console) createToken(w http.ResponseWriter, r *http.Request, v *Visit) {
	in := orchestrator.CreateTokenInput{Name: r.PostForm.Get("name"), Scopes: r.PostForm["scope"]}
	var bad error
	if s := strings.TrimSpace(r.PostForm.Get("expires_in")); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			bad = wire.Errorf(wire.CodeBadRequest, "expires in %q: choose one of the offered lifetimes", s)
		}
		in.ExpiresIn = n
	}
	if len(in.Scopes) == 0 && bad == nil {
		bad = wire.Errorf(wire.CodeBadRequest, "choose at least one scope")
	}
	var made orchestrator.CreatedToken
	if bad == nil {
		made, bad = c.svc.CreateMyToken(r.Context(), v.Principal, in)
	}
	d := web.Tokens{Name: in.Name}
	status := http.StatusOK
	if bad != nil {
		d.Error = wire.DetailOf(bad).Message
		status = wire.StatusOf(wire.DetailOf(bad).Code)
		if status >= 500 {
			c.fail(w, r, v, bad)
			return
		}
		// Keep what was chosen.
		d.Scopes = scopeChoices(v, func(sc rbac.Scope) bool { return slices.Contains(in.Scopes, string(sc)) })
		d.Lifetimes = c.lifetimes(time.Duration(in.ExpiresIn) * time.Second)
	} else {
		d.Name = ""
		d.Secret, d.SecretName = made.Secret, made.Token.Name
		d.Configs = tokenConfigs(c.opts.PublicURL, c.opts.PublicURL+"/mcp", made.Secret)
	}
	d, err := c.tokenData(r, v, d)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, status, web.PageTokens, "tokens", "Tokens", d)
}

func (c *Console) revokeToken(w http.ResponseWriter, r *http.Request, v *Visit) {
	if _, err := c.svc.RevokeMyToken(r.Context(), v.Principal, orchestrator.TokenRef{TokenID: r.PathValue("id")}); err != nil {
		c.fail(w, r, v, err)
		return
	}
	back := "/tokens?revoked=1"
	if r.PostForm.Get("all") != "" {
		back += "&all=1"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
