package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage session tokens (talks to the database directly)"}
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func newTokenCreateCmd(e *env) *cobra.Command {
	var (
		db      dbFlags
		user    string
		name    string
		scopes  []string
		expires time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a session token and print it (only the token, on stdout)",
		Long: "Create a session token for a user, creating the user when missing: the first user ever becomes admin, " +
			"later ones members of the default namespace. The token is printed once; only its hash is stored.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return fmt.Errorf("--user is required")
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
	cmd.Flags().StringVar(&user, "user", "", "user the token acts as (created when missing)")
	cmd.Flags().StringVar(&name, "name", "", "a label for the token")
	cmd.Flags().StringSliceVar(&scopes, "scopes", nil, "berth:read, berth:write, berth:exec, berth:admin (default: read, write, exec, plus admin for admins)")
	cmd.Flags().DurationVar(&expires, "expires", 720*time.Hour, "lifetime (0 = never expires)")
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

func newTokenListCmd(e *env) *cobra.Command {
	var (
		db   dbFlags
		user string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List session tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
			if err != nil {
				return err
			}
			defer closeDB()
			toks, err := orchestrator.NewIdentity(st, "", nil).ListTokens(cmd.Context(), user)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tSCOPES\tEXPIRES\tLAST USED\tSTATE")
			for _, t := range toks {
				state := "active"
				if t.RevokedAt != nil {
					state = "revoked"
				} else if t.ExpiresAt != nil && t.ExpiresAt.Before(time.Now()) {
					state = "expired"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Prefix, t.Name, strings.Join(t.Scopes, ","), when(t.ExpiresAt), when(t.LastUsedAt), state)
			}
			return tw.Flush()
		},
	}
	db.register(cmd)
	cmd.Flags().StringVar(&user, "user", "", "only this user's tokens")
	return cmd
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke a session token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
	return cmd
}
