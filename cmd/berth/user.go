package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

func newUserCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Manage users and their roles (talks to the database directly)"}
	grant := func(revoke bool) *cobra.Command {
		var (
			db  dbFlags
			req orchestrator.GrantRequest
		)
		verb, short := "grant", "Bind a role to a user or group"
		if revoke {
			verb, short = "revoke", "Remove a role binding"
		}
		c := &cobra.Command{
			Use:   verb,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
				if err != nil {
					return err
				}
				defer closeDB()
				id := orchestrator.NewIdentity(st, "", nil)
				if revoke {
					err = id.Revoke(cmd.Context(), req)
				} else {
					_, err = id.Grant(cmd.Context(), req)
				}
				if err != nil {
					return err
				}
				who := "user " + req.User
				if req.Group != "" {
					who = "group " + req.Group
				}
				where := "every namespace"
				if req.Namespace != "" {
					where = "namespace " + req.Namespace
				}
				fmt.Fprintf(e.stderr, "%s: %s %s in %s\n", verb, who, req.Role, where)
				return nil
			},
		}
		db.register(c)
		c.Flags().StringVar(&req.User, "user", "", "user name")
		c.Flags().StringVar(&req.Group, "group", "", "group name (from the identity provider)")
		c.Flags().StringVar(&req.Role, "role", "", "admin, member or viewer")
		c.Flags().StringVar(&req.Namespace, "namespace", "", "namespace (default: every namespace)")
		return c
	}
	list := func() *cobra.Command {
		var db dbFlags
		c := &cobra.Command{
			Use:   "list",
			Short: "List users",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				st, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
				if err != nil {
					return err
				}
				defer closeDB()
				users, err := st.ListUsers(cmd.Context())
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tUSERNAME\tEMAIL\tGROUPS\tDISABLED")
				for _, u := range users {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\n", u.ID, u.Username, u.Email, u.Groups, u.Disabled)
				}
				return tw.Flush()
			},
		}
		db.register(c)
		return c
	}
	cmd.AddCommand(grant(false), grant(true), list())
	return cmd
}
