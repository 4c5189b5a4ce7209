package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// The token commands have two forms. With --remote they call the API
// with the caller's own credentials (`berth login`, or BERTH_URL and
// BERTH_TOKEN), under the same rules as the console and MCP's
// create_token. Without it they open the database directly, on the
// operator's authority: the bootstrap of a new berth, before anyone has
// a token.

// remoteFlags select the API form of a token command.
type remoteFlags struct {
	remote bool
	config string
}

func (f *remoteFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.remote, "remote", false, "act through the API as yourself (credentials from `berth login` or BERTH_URL and BERTH_TOKEN) instead of on the database")
	configFlag(cmd, &f.config)
}

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage session tokens (on the database; --remote through the API as yourself)",
	}
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func newTokenCreateCmd(e *env) *cobra.Command {
	var (
		db      dbFlags
		rf      remoteFlags
		user    string
		name    string
		scopes  []string
		expires time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a session token and print it (only the token, on stdout)",
		Long: "Create a session token and print it once; only its hash is stored.\n\n" +
			"On the server host (bootstrap): --user names the user, created when missing: the first user ever becomes admin, " +
			"later ones members of the default namespace.\n" +
			"Anywhere else: --remote creates a token for yourself through the API, with scopes no wider than your credential's " +
			"and a lifetime no longer than the server allows.",
		Example: "  berth token create --user admin\n  berth token create --remote --name ci --scopes berth:read,berth:exec --expires 168h",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.remote {
				if user != "" {
					return wire.Errorf(wire.CodeBadRequest, "--user does not go with --remote: a remote token is always for yourself")
				}
				c, err := credentials(e.getenv, rf.config)
				if err != nil {
					return err
				}
				if name == "" {
					name = "berth-cli"
				}
				in := orchestrator.CreateTokenInput{Name: name, Scopes: splitList(scopes)}
				if cmd.Flags().Changed("expires") {
					if expires < time.Second {
						return wire.Errorf(wire.CodeBadRequest, "--expires %s: a remote token always expires; give a lifetime of at least 1s", expires)
					}
					in.ExpiresIn = int64(expires / time.Second)
				}
				var out orchestrator.CreatedToken
				if err := callAPI(cmd.Context(), c, http.MethodPost, "/api/tokens", in, &out); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, out.Secret)
				fmt.Fprintf(e.stderr, "token %s for %s, scopes %s, expires %s\n", out.Token.ID, out.Token.Username, strings.Join(out.Token.Scopes, " "), when(out.Token.ExpiresAt))
				return nil
			}
			if user == "" {
				return wire.Errorf(wire.CodeBadRequest, "--user is required (or --remote to create one for yourself through the API)")
			}
			st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
			if err != nil {
				return err
			}
			defer closeDB()
			id := orchestrator.NewIdentity(st, "", e.logger("warn"))
			secret, tok, err := id.CreateToken(cmd.Context(), orchestrator.CreateTokenRequest{
				Username: user, Name: name, Scopes: splitList(scopes), ExpiresIn: expires,
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, secret)
			fmt.Fprintf(e.stderr, "token %s for %s, scopes %s\n", tok.ID, user, strings.Join(tok.Scopes, " "))
			return nil
		},
	}
	db.register(cmd)
	rf.register(cmd)
	cmd.Flags().StringVar(&user, "user", "", "user the token acts as (created when missing); not with --remote")
	cmd.Flags().StringVar(&name, "name", "", "a label for the token (--remote default: berth-cli)")
	cmd.Flags().StringSliceVar(&scopes, "scopes", nil, "berth:read, berth:write, berth:exec, berth:admin (default: read, write, exec, plus admin for admins on the database; read, write, exec as far as you hold them with --remote)")
	cmd.Flags().DurationVar(&expires, "expires", 720*time.Hour, "lifetime (0 = never expires, on the database only; --remote default: the server's)")
	return cmd
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
			out = append(out, part)
		}
	}
	return out
}

// tokenRow is what the list prints of a token, from either form.
type tokenRow struct {
	id, prefix, user, name, scopes, expires, lastUsed, state string
}

func printTokens(e *env, rows []tokenRow, out outputFormat) error {
	if out == "json" {
		list := make([]map[string]string, 0, len(rows))
		for _, r := range rows {
			list = append(list, map[string]string{"id": r.id, "prefix": r.prefix, "username": r.user, "name": r.name,
				"scopes": r.scopes, "expires_at": r.expires, "last_used_at": r.lastUsed, "state": r.state})
		}
		return writeJSON(e.stdout, list)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tUSER\tNAME\tSCOPES\tEXPIRES\tLAST USED\tSTATE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.prefix, r.user, r.name, r.scopes, r.expires, r.lastUsed, r.state)
	}
	return tw.Flush()
}

func newTokenListCmd(e *env) *cobra.Command {
	var (
		db   dbFlags
		rf   remoteFlags
		user string
		all  bool
		out  outputFormat
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List session tokens (never their secrets)",
		Example: "  berth token list --user alice\n  berth token list --remote\n  berth token list --remote --all   # admins: everyone's",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			var rows []tokenRow
			if rf.remote {
				if user != "" {
					return wire.Errorf(wire.CodeBadRequest, "--user does not go with --remote: use --all (admins) to see everyone's")
				}
				c, err := credentials(e.getenv, rf.config)
				if err != nil {
					return err
				}
				path := "/api/tokens"
				if all {
					path += "?" + url.Values{"all": {"true"}}.Encode()
				}
				var list orchestrator.TokenList
				if err := callAPI(cmd.Context(), c, http.MethodGet, path, nil, &list); err != nil {
					return err
				}
				for _, t := range list.Tokens {
					rows = append(rows, tokenRow{t.ID, t.Prefix, t.Username, t.Name, strings.Join(t.Scopes, ","), when(t.ExpiresAt), when(t.LastUsedAt), t.State})
				}
				return printTokens(e, rows, out)
			}
			if all {
				return wire.Errorf(wire.CodeBadRequest, "--all goes with --remote; on the database every token is listed unless --user is given")
			}
			st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
			if err != nil {
				return err
			}
			defer closeDB()
			toks, err := orchestrator.NewIdentity(st, "", nil).ListTokens(cmd.Context(), user)
			if err != nil {
				return err
			}
			now := time.Now()
			for _, t := range toks {
				state := orchestrator.TokenActive
				if t.RevokedAt != nil {
					state = orchestrator.TokenRevoked
				} else if t.ExpiresAt != nil && !t.ExpiresAt.After(now) {
					state = orchestrator.TokenExpired
				}
				rows = append(rows, tokenRow{t.ID, t.Prefix, t.Username, t.Name, strings.Join(t.Scopes, ","), when(t.ExpiresAt), when(t.LastUsedAt), state})
			}
			return printTokens(e, rows, out)
		},
	}
	db.register(cmd)
	rf.register(cmd)
	cmd.Flags().StringVar(&user, "user", "", "only this user's tokens (database form)")
	cmd.Flags().BoolVar(&all, "all", false, "with --remote: everyone's tokens (admins only)")
	out.register(cmd)
	return cmd
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	var (
		db dbFlags
		rf remoteFlags
	)
	cmd := &cobra.Command{
		Use:     "revoke TOKEN_ID",
		Short:   "Revoke a session token",
		Example: "  berth token revoke 3f6c…\n  berth token revoke --remote 3f6c…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rf.remote {
				c, err := credentials(e.getenv, rf.config)
				if err != nil {
					return err
				}
				var out orchestrator.Token
				if err := callAPI(cmd.Context(), c, http.MethodDelete, "/api/tokens/"+url.PathEscape(args[0]), nil, &out); err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "token %s (%s) revoked\n", out.ID, out.Name)
				return nil
			}
			st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
			if err != nil {
				return err
			}
			defer closeDB()
			if err := orchestrator.NewIdentity(st, "", nil).RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "token %s revoked\n", args[0])
			return nil
		},
	}
	db.register(cmd)
	rf.register(cmd)
	return cmd
}
