package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

func newLoginCmd(e *env) *cobra.Command {
	var serverURL, token, cfg string
	cmd := &cobra.Command{
		Use:   "login --url URL --token TOKEN",
		Short: "Check a server URL and token and save them for berth whoami and berth mcp",
		Long: "Check the token against GET URL/api/whoami and save URL and token in <user config dir>/berth/config.json " +
			"(owner-only). --token - reads the token from stdin, which keeps it out of the shell history.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serverURL == "" {
				return wire.Errorf(wire.CodeBadRequest, "--url is required")
			}
			if token == "" {
				return wire.Errorf(wire.CodeBadRequest, "--token is required (--token - reads it from stdin)")
			}
			if token == "-" {
				t, err := readToken(e.stdin)
				if err != nil {
					return err
				}
				token = t
			}
			u, err := cliconfig.NormalizeURL(serverURL)
			if err != nil {
				return err
			}
			c := cliconfig.Config{URL: u, Token: strings.TrimSpace(token)}
			if err := c.Validate(); err != nil {
				return err
			}
			path, err := configPath(cfg)
			if err != nil {
				return err
			}
			if plainRemote(u) {
				fmt.Fprintf(e.stderr, "warning: %s is plain http to a non-loopback host; the token travels unencrypted\n", u)
			}
			me, err := fetchWhoami(cmd.Context(), c)
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			if err := cliconfig.Save(path, c); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "logged in to %s as %s; credentials saved in %s\n", c.URL, me.Username, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&serverURL, "url", "", "berth server base URL, e.g. https://berth.example.com")
	cmd.Flags().StringVar(&token, "token", "", "session token (from `berth token create`); - reads it from stdin")
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
		Short: "Forget the credentials saved by berth login",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := configPath(cfg)
			if err != nil {
				return err
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

func newWhoamiCmd(e *env) *cobra.Command {
	var cfg string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the saved credentials (or BERTH_URL and BERTH_TOKEN) are on the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := credentials(e.getenv, cfg)
			if err != nil {
				return err
			}
			me, err := fetchWhoami(cmd.Context(), c)
			if err != nil {
				return err
			}
			printWhoami(e.stdout, c.URL, me)
			return nil
		},
	}
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
