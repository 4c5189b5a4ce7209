package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

func newLoginCmd(e *env) *cobra.Command {
	var (
		serverURL, token, cfg string
		lo                    loginOptions
	)
	cmd := &cobra.Command{
		Use:   "login --url URL [--token TOKEN]",
		Short: "Log in to a berth server (in the browser, or with a session token) and save the credentials",
		Long: "Without --token, log in through the server's OAuth login: berth opens your browser (or, with --no-browser " +
			"or when none can be opened, prints the URL), you sign in and approve, and the browser comes back to berth on a " +
			"loopback address. When that browser runs on another machine, paste the address it ends on (or its code) into " +
			"the terminal. The access token is refreshed as it expires.\n\n" +
			"With --token, check a session token (from berth token create) against GET URL/api/whoami instead; --token - reads it " +
			"from stdin, which keeps it out of the shell history.\n\n" +
			"Credentials are saved in <user config dir>/berth/config.json (owner-only).",
		Example: "  berth login --url https://berth.example.com\n" +
			"  berth login --url https://berth.example.com --no-browser   # over ssh\n" +
			"  berth token create --user $USER | berth login --url http://127.0.0.1:8080 --token -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serverURL == "" {
				return wire.Errorf(wire.CodeBadRequest, "--url is required")
			}
			u, err := cliconfig.NormalizeURL(serverURL)
			if err != nil {
				return err
			}
			path, err := configPath(cfg)
			if err != nil {
				return err
			}
			var c cliconfig.Config
			switch token {
			case "":
				if lo.timeout <= 0 {
					return wire.Errorf(wire.CodeBadRequest, "--timeout %s: want a positive duration", lo.timeout)
				}
				if plainRemote(u) {
					fmt.Fprintf(e.stderr, "warning: %s is plain http to a non-loopback host; tokens travel unencrypted\n", u)
				}
				lo.scopes = splitList(lo.scopes)
				if c, err = oauthLogin(cmd.Context(), e, u, lo); err != nil {
					return err
				}
			case "-":
				t, err := readToken(e.stdin)
				if err != nil {
					return err
				}
				token = t
				fallthrough
			default:
				c = cliconfig.Config{URL: u, Token: strings.TrimSpace(token)}
				if err := c.Validate(); err != nil {
					return err
				}
				if plainRemote(u) {
					fmt.Fprintf(e.stderr, "warning: %s is plain http to a non-loopback host; the token travels unencrypted\n", u)
				}
			}
			me, err := fetchWhoami(cmd.Context(), newRemote(c, ""))
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			prev, prevErr := cliconfig.Load(path)
			if err := cliconfig.Save(path, c); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "logged in to %s as %s; credentials saved in %s\n", c.URL, me.Username, path)
			// The login this one replaced would otherwise stay valid
			// until its refresh token expires, with nobody holding it.
			if prevErr == nil && prev.OAuth != nil && prev.OAuth.RefreshToken != "" {
				if err := revokeLogin(cmd.Context(), prev); err != nil {
					fmt.Fprintf(e.stderr, "warning: could not revoke the previous login at %s (%v)\n", prev.URL, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&serverURL, "url", "", "berth server base URL, e.g. https://berth.example.com")
	// No backticks in this usage: pflag would show their text as the
	// flag's placeholder.
	cmd.Flags().StringVar(&token, "token", "", "a session token (from berth token create) instead of the browser login; - reads it from stdin")
	cmd.Flags().BoolVar(&lo.noBrowser, "no-browser", false, "print the login URL instead of opening a browser, and accept the redirected address pasted back")
	cmd.Flags().StringSliceVar(&lo.scopes, "scopes", []string{"berth:read", "berth:write", "berth:exec"}, "scopes to ask for in the browser login")
	cmd.Flags().DurationVar(&lo.timeout, "timeout", 10*time.Minute, "how long to wait for the browser login")
	configFlag(cmd, &cfg)
	return cmd
}

// readToken reads the first non-empty line of r.
func readToken(r io.Reader) (string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			return t, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read token from stdin: %w", err)
	}
	return "", wire.Errorf(wire.CodeBadRequest, "--token -: stdin held no token")
}

// plainRemote reports an http:// URL whose host is not loopback.
func plainRemote(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

func newLogoutCmd(e *env) *cobra.Command {
	var cfg string
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Revoke the browser login's tokens and forget the saved credentials",
		Long: "Forget the credentials saved by berth login. For a browser login, its tokens are revoked at the server " +
			"first; a session token given with --token stays valid until it expires or is revoked (berth token revoke --remote ID).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := configPath(cfg)
			if err != nil {
				return err
			}
			c, err := cliconfig.Load(path)
			if err == nil && c.OAuth != nil {
				if err := revokeLogin(cmd.Context(), c); err != nil {
					fmt.Fprintf(e.stderr, "warning: could not revoke the login's tokens at the server (%v); they expire on their own\n", err)
				} else {
					fmt.Fprintf(e.stdout, "revoked the login's tokens at %s\n", c.URL)
				}
			} else if err == nil {
				fmt.Fprintf(e.stdout, "the session token stays valid at %s until it expires or is revoked (berth token revoke --remote ID)\n", c.URL)
			}
			removed, err := cliconfig.Remove(path)
			if err != nil {
				return err
			}
			if removed {
				fmt.Fprintf(e.stdout, "logged out: removed %s\n", path)
			} else {
				fmt.Fprintf(e.stdout, "not logged in (no %s)\n", path)
			}
			return nil
		},
	}
	configFlag(cmd, &cfg)
	return cmd
}

// revokeLogin revokes an OAuth login at its server (RFC 7009): the
// refresh token, which ends the whole grant, else the access token.
func revokeLogin(ctx context.Context, c cliconfig.Config) error {
	o := c.OAuth
	if o.RevocationEndpoint == "" {
		return fmt.Errorf("the server has no revocation endpoint")
	}
	tok, hint := o.RefreshToken, "refresh_token"
	if tok == "" {
		tok, hint = c.Token, "access_token"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, status, err := postForm(ctx, http.DefaultClient, o.RevocationEndpoint, url.Values{
		"token": {tok}, "token_type_hint": {hint}, "client_id": {o.ClientID},
	})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return oauthAnswerError(o.RevocationEndpoint, status, raw)
	}
	return nil
}

func newWhoamiCmd(e *env) *cobra.Command {
	var (
		cfg string
		out outputFormat
	)
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the saved credentials (or BERTH_URL and BERTH_TOKEN) are on the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := credentials(e.getenv, cfg)
			if err != nil {
				return err
			}
			me, err := fetchWhoami(cmd.Context(), c)
			if err != nil {
				return err
			}
			if out == "json" {
				return writeJSON(e.stdout, me)
			}
			printWhoami(e.stdout, c.URL, me)
			if o := c.Config().OAuth; o != nil {
				fmt.Fprintf(e.stdout, "login:      browser (OAuth at %s), access token refreshed as it expires\n", o.Issuer)
			}
			return nil
		},
	}
	out.register(cmd)
	configFlag(cmd, &cfg)
	return cmd
}

func printWhoami(w io.Writer, serverURL string, me orchestrator.Whoami) {
	fmt.Fprintf(w, "user:       %s (%s)\n", me.Username, me.UserID)
	fmt.Fprintf(w, "server:     %s\n", serverURL)
	roles := make([]string, 0, len(me.Roles))
	for _, r := range me.Roles {
		if r.Namespace == "" {
			roles = append(roles, r.Role)
		} else {
			roles = append(roles, r.Role+"@"+r.Namespace)
		}
	}
	fmt.Fprintf(w, "roles:      %s\n", orNone(roles))
	fmt.Fprintf(w, "scopes:     %s\n", orNone(me.Scopes))
	fmt.Fprintf(w, "namespaces: %s\n", orNone(me.Namespaces))
	if me.TokenID != "" {
		fmt.Fprintf(w, "token id:   %s\n", me.TokenID)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}
