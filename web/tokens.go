package web

import "html/template"

// PageTokens is the tokens page.
const PageTokens = "tokens.html"

// ClientConfig is one ready-to-paste MCP client configuration.
type ClientConfig struct {
	// ID names the configuration in the page (element ids, tests).
	ID     string
	Client string
	// Where the text goes: a file or a settings screen.
	Where string
	Text  string
	// InstallLink is a click-to-install link (VS Code), if the client
	// has one.
	InstallLink string
	Note        string
}

// Link is InstallLink for an href. html/template would neutralise the
// vscode: scheme, so it is passed as trusted: the console builds it from
// the configured public URL and encoding/json, never from request input.
func (c ClientConfig) Link() template.URL { return template.URL(c.InstallLink) }

// TokenRow is one token in the list; times are written out already
// ("never" for a token never used).
type TokenRow struct {
	ID, Name, Prefix, Username, State string
	Scopes                            []string
	Created, Expires, LastUsed        string
	// Revocable: the state allows revoking (active).
	Revocable bool
}

// Choice is one option of a select or checkbox group.
type Choice struct {
	Value, Label string
	Selected     bool
}

// Tokens is the data of the tokens page.
type Tokens struct {
	MCPURL string
	// Secret is a token just created, shown this once, with its
	// configurations.
	Secret     string
	SecretName string
	Configs    []ClientConfig
	// OAuthConfigs need no token.
	OAuthConfigs []ClientConfig
	Tokens       []TokenRow
	// All: the list holds everyone's tokens (an admin asked).
	All, Admin bool
	Scopes     []Choice
	Lifetimes  []Choice
	// Name is the form's name field, kept after an error.
	Name   string
	Error  string
	Notice string
}
