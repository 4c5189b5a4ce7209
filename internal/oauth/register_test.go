package oauth_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestRegistrationBadInput(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct {
		name, ctype, body string
		status            int
		code, says        string
	}{
		{"malformed JSON", "application/json", `{"redirect_uris": [`, 400, "invalid_client_metadata", "not a JSON object"},
		{"not an object", "application/json", `["https://a.example/cb"]`, 400, "invalid_client_metadata", "not a JSON object"},
		{"trailing data", "application/json", `{"redirect_uris":["https://a.example/cb"]} {}`, 400, "invalid_client_metadata", "after the JSON object"},
		{"wrong type", "application/json", `{"redirect_uris":"https://a.example/cb"}`, 400, "invalid_client_metadata", "redirect_uris"},
		{"not JSON", "application/x-www-form-urlencoded", `redirect_uris=https://a.example/cb`, 400, "invalid_client_metadata", "application/json"},
		{"oversized", "application/json", `{"client_name":"` + strings.Repeat("a", 17<<10) + `","redirect_uris":["https://a.example/cb"]}`, 413, "invalid_client_metadata", "larger than"},
		{"no redirect URIs", "application/json", `{"client_name":"x"}`, 400, "invalid_redirect_uri", "redirect_uris is required"},
		{"javascript", "application/json", `{"redirect_uris":["javascript:alert(1)"]}`, 400, "invalid_redirect_uri", "javascript"},
		{"javascript upper case", "application/json", `{"redirect_uris":["JavaScript://x/%0aalert(1)"]}`, 400, "invalid_redirect_uri", "not allowed"},
		{"data", "application/json", `{"redirect_uris":["data:text/html,<script>alert(1)</script>"]}`, 400, "invalid_redirect_uri", "data"},
		{"file", "application/json", `{"redirect_uris":["file:///etc/passwd"]}`, 400, "invalid_redirect_uri", "file"},
		{"non-loopback http", "application/json", `{"redirect_uris":["http://evil.example/cb"]}`, 400, "invalid_redirect_uri", "loopback"},
		{"http lookalike", "application/json", `{"redirect_uris":["http://127.0.0.1.evil.example/cb"]}`, 400, "invalid_redirect_uri", "loopback"},
		{"fragment", "application/json", `{"redirect_uris":["https://a.example/cb#x"]}`, 400, "invalid_redirect_uri", "fragment"},
		{"user info", "application/json", `{"redirect_uris":["https://user@a.example/cb"]}`, 400, "invalid_redirect_uri", "user information"},
		{"relative", "application/json", `{"redirect_uris":["/cb"]}`, 400, "invalid_redirect_uri", "not absolute"},
		{"control character", "application/json", `{"redirect_uris":["https://a.example/c\nb"]}`, 400, "invalid_redirect_uri", "control"},
		{"one bad among good", "application/json", `{"redirect_uris":["https://a.example/cb","javascript:x"]}`, 400, "invalid_redirect_uri", "javascript"},
		{"implicit grant", "application/json", `{"redirect_uris":["https://a.example/cb"],"grant_types":["implicit"]}`, 400, "invalid_client_metadata", "implicit"},
		{"token response", "application/json", `{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}`, 400, "invalid_client_metadata", "token"},
		{"unknown auth method", "application/json", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`, 400, "invalid_client_metadata", "private_key_jwt"},
		{"unknown scope", "application/json", `{"redirect_uris":["https://a.example/cb"],"scope":"berth:read root"}`, 400, "invalid_client_metadata", "root"},
		{"script logo", "application/json", `{"redirect_uris":["https://a.example/cb"],"logo_uri":"javascript:alert(1)"}`, 400, "invalid_client_metadata", "logo_uri"},
		{"control in name", "application/json", `{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0000b"}`, 400, "invalid_client_metadata", "client_name"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("POST", e.url+"/oauth/register", strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		var oe oauthErr
		resp, body := e.do(t, req, &oe)
		if resp.StatusCode != c.status || oe.Error != c.code || !strings.Contains(oe.Description, c.says) {
			t.Errorf("%s: want %d %s saying %q, got %d %s", c.name, c.status, c.code, c.says, resp.StatusCode, body)
		}
	}
	if n := e.count(t, "oauth_clients"); n != 0 {
		t.Fatalf("%d clients registered from bad input", n)
	}

	// Accepted shapes: loopback http with any host form, private-use
	// schemes of native apps, and the client cannot pick its client_id.
	var reg registration
	resp, body := e.postJSON(t, "/oauth/register", `{"client_id":"chosen","redirect_uris":["http://localhost/cb","http://[::1]:8080/cb","vscode://vscode.github-authentication/did-authenticate","cursor://anysphere.cursor-retrieval/oauth/callback","com.example.app:/oauth2redirect"],"token_endpoint_auth_method":"none"}`, &reg)
	if resp.StatusCode != 201 || reg.ClientID == "chosen" || len(reg.RedirectURIs) != 5 {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
}
