package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/orchestrator"
)

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func newClientsCmd(e *env) *cobra.Command {
	var cc clientCmd
	cmd := &cobra.Command{
		Use:     "clients",
		Short:   "List your clients (the units of work that own servers)",
		Example: "  berth clients\n  berth clients -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			var out catalog.ClientList
			raw, err := callOp(cmd.Context(), r, "list_clients", nil, &out)
			if err != nil || cc.out == "json" {
				return orJSON(e, err, raw)
			}
			rows := make([][]string, 0, len(out.Clients))
			for _, c := range out.Clients {
				rows = append(rows, []string{c.ID, c.Name, c.Namespace, c.Status, stamp(c.CreatedAt)})
			}
			return writeTable(e.stdout, []string{"ID", "NAME", "NAMESPACE", "STATUS", "CREATED"}, rows)
		},
	}
	cc.register(cmd)
	return cmd
}

// orJSON ends a command: its error, else the raw answer as JSON.
func orJSON(e *env, err error, raw []byte) error {
	if err != nil {
		return err
	}
	return writeJSON(e.stdout, jsonRaw(raw))
}

func newServersCmd(e *env) *cobra.Command {
	var (
		cc     clientCmd
		client string
	)
	cmd := &cobra.Command{
		Use:     "servers",
		Short:   "List your servers (sandboxes)",
		Example: "  berth servers\n  berth servers --client 0c5e…\n  berth servers -o json | jq -r '.servers[].id'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			var out catalog.ServerList
			raw, err := callOp(cmd.Context(), r, "list_servers", map[string]any{"client_id": client}, &out)
			if err != nil || cc.out == "json" {
				return orJSON(e, err, raw)
			}
			rows := make([][]string, 0, len(out.Servers))
			for _, s := range out.Servers {
				rows = append(rows, []string{s.ID, s.ClientID, s.ImageTag, s.Status, s.ServerName, stamp(s.CreatedAt)})
			}
			return writeTable(e.stdout, []string{"ID", "CLIENT", "IMAGE", "STATUS", "NAME", "CREATED"}, rows)
		},
	}
	cc.register(cmd)
	cmd.Flags().StringVar(&client, "client", "", "only this client's servers")
	return cmd
}

func newStopCmd(e *env) *cobra.Command {
	var cc clientCmd
	cmd := &cobra.Command{
		Use:     "stop SERVER...",
		Short:   "Stop servers and delete their sandboxes and files",
		Example: "  berth stop 5b1f…\n  berth servers -o json | jq -r '.servers[].id' | xargs berth stop",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			for _, id := range args {
				var s orchestrator.Server
				raw, err := callOp(cmd.Context(), r, "stop_server", map[string]any{"server_id": id}, &s)
				if err != nil {
					return fmt.Errorf("stop server %s: %w", id, err)
				}
				if cc.out == "json" {
					if err := writeJSON(e.stdout, jsonRaw(raw)); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(e.stdout, "%s\t%s\n", s.ID, s.Status)
			}
			return nil
		},
	}
	cc.register(cmd)
	return cmd
}

func newStartCmd(e *env) *cobra.Command {
	var (
		cc                 clientCmd
		client, name       string
		envVars            []string
		wait               time.Duration
		reuse, restartPol  string
		clientName, namesp string
		network            string
		allow              []string
	)
	cmd := &cobra.Command{
		Use:   "start IMAGE",
		Short: "Start a server (sandbox) from an image and wait until it runs",
		Long: "Start a server for a client and wait for it, with progress on stderr (a spinner on a terminal, a line per " +
			"change otherwise). Without --client a new client is registered for it. The server id goes to stdout.",
		Example: "  berth start base\n  SERVER=$(berth start base --name build --env GOFLAGS=-mod=mod)\n  berth start python:3.12 --network allowlist --allow pypi.org --allow files.pythonhosted.org\n  berth start base --client 0c5e… -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := envInput(map[string]any{}, envVars); err != nil {
				return err // before a client is registered for nothing
			}
			policy, err := networkInput(network, allow)
			if err != nil {
				return err
			}
			if client == "" {
				var c orchestrator.Client
				in := map[string]any{"name": clientName}
				if namesp != "" {
					in["namespace"] = namesp
				}
				if _, err := callOp(ctx, r, "register_client", in, &c); err != nil {
					return fmt.Errorf("register a client for the server: %w", err)
				}
				client = c.ID
				fmt.Fprintf(e.stderr, "registered client %s\n", c.ID)
			}
			in := map[string]any{"client_id": client, "image_tag": args[0], "server_name": name,
				"reuse_strategy": reuse, "restart_policy": restartPol}
			if policy != nil {
				in["network"] = policy
			}
			if err := envInput(in, envVars); err != nil {
				return err
			}
			op, err := runOperation(ctx, e, r, "start_server", in, "starting server from "+args[0], wait, true)
			if err != nil {
				return err
			}
			var res orchestrator.StartServerResult
			if err := jsonInto(op.Result, &res); err != nil {
				return err
			}
			if cc.out == "json" {
				return writeJSON(e.stdout, jsonRaw(op.Result))
			}
			fmt.Fprintln(e.stdout, res.ServerID)
			fmt.Fprintf(e.stderr, "server %s of client %s is %s\n", res.ServerID, res.ClientID, res.Server.Status)
			return nil
		},
	}
	cc.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&client, "client", "", "the client to own the server (default: register a new one)")
	fl.StringVar(&clientName, "client-name", "berth-cli", "name of the client registered when --client is not given")
	fl.StringVar(&namesp, "namespace", "", "namespace of the client registered when --client is not given")
	fl.StringVar(&name, "name", "", "a name for the server")
	fl.StringArrayVar(&envVars, "env", nil, "NAME=VALUE of the sandbox's environment (repeatable)")
	fl.StringVar(&reuse, "reuse", "", "NONE, RESET or RESTART a finished server of the client")
	fl.StringVar(&restartPol, "restart-policy", "", "never or on_failure")
	fl.StringVar(&network, "network", "", "what the sandbox may reach: none, allowlist (with --allow) or public (default: the operator's)")
	fl.StringArrayVar(&allow, "allow", nil, "with --network allowlist: a domain name (pypi.org, *.github.com), address or CIDR, optionally with :port (repeatable)")
	fl.DurationVar(&wait, "timeout", 10*time.Minute, "how long to wait for the server")
	return cmd
}

// networkInput is a network policy from --network and --allow (nil when
// neither is given).
func networkInput(mode string, allow []string) (*egress.Policy, error) {
	if mode == "" && len(allow) == 0 {
		return nil, nil
	}
	if mode == "" {
		mode = string(egress.Allowlist)
	}
	p := &egress.Policy{Egress: egress.Mode(mode), Allow: allow}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("--network/--allow: %w", err)
	}
	return p, nil
}

func newNetworkCmd(e *env) *cobra.Command {
	var (
		cc    clientCmd
		allow []string
	)
	cmd := &cobra.Command{
		Use:   "network SERVER none|allowlist|public",
		Short: "Change what a running server's sandbox may reach on the network",
		Long: "Set a server's network policy, within what the operator allows. Its sandbox's next connection is decided " +
			"by it; open connections stay.",
		Example: "  berth network $SERVER allowlist --allow pypi.org --allow files.pythonhosted.org\n  berth network $SERVER none",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			policy, err := networkInput(args[1], allow)
			if err != nil {
				return err
			}
			var srv orchestrator.Server
			if _, err := callOp(cmd.Context(), r, "set_server_network", map[string]any{"server_id": args[0], "network": policy}, &srv); err != nil {
				return err
			}
			if cc.out == "json" {
				return writeJSON(e.stdout, srv)
			}
			fmt.Fprintf(e.stdout, "server %s: network %s\n", srv.ID, srv.Network)
			return nil
		},
	}
	cc.register(cmd)
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "with allowlist: a domain name (pypi.org, *.github.com), address or CIDR, optionally with :port (repeatable)")
	return cmd
}

func newOpsCmd(e *env) *cobra.Command {
	var out outputFormat
	cmd := &cobra.Command{
		Use:     "ops",
		Short:   "List the operations berth offers (REST routes and MCP tools, from its catalogue)",
		Example: "  berth ops\n  berth ops -o json | jq -r '.[].rest'",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := out.check(); err != nil {
				return err
			}
			type row struct {
				Name    string `json:"name"`
				REST    string `json:"rest,omitempty"`
				Tool    string `json:"mcp_tool,omitempty"`
				Summary string `json:"summary"`
			}
			var rows []row
			for _, o := range operations.Ops() {
				r := row{Name: o.Name, Summary: o.Summary}
				if o.REST.Path != "" {
					r.REST = o.REST.Method + " " + o.REST.Path
				}
				if !o.NoMCP {
					r.Tool = o.Tool()
				}
				rows = append(rows, r)
			}
			if out == "json" {
				return writeJSON(e.stdout, rows)
			}
			table := make([][]string, 0, len(rows))
			for _, r := range rows {
				table = append(table, []string{r.Name, r.REST, r.Tool, r.Summary})
			}
			return writeTable(e.stdout, []string{"NAME", "REST", "MCP TOOL", "SUMMARY"}, table)
		},
	}
	out.register(cmd)
	return cmd
}

// newTokensCmd is `berth token --remote`: your own tokens, through the
// API.
func newTokensCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tokens",
		Short:   "Manage your session tokens through the API (berth token --remote)",
		Example: "  berth tokens list\n  berth tokens create --name ci --scopes berth:read,berth:exec --expires 168h\n  berth tokens revoke 3f6c…",
	}
	for _, sub := range []*cobra.Command{newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e)} {
		sub.Flags().Set("remote", "true")
		sub.Long = "" // the database form's, which does not apply
		for _, f := range []string{"remote", "user", "database-url", "database-url-file", "data-dir"} {
			sub.Flags().MarkHidden(f)
		}
		var ex []string
		for _, line := range strings.Split(sub.Example, "\n") {
			if strings.Contains(line, "--remote") {
				ex = append(ex, strings.Replace(strings.Replace(line, "berth token ", "berth tokens ", 1), " --remote", "", 1))
			}
		}
		sub.Example = strings.Join(ex, "\n")
		cmd.AddCommand(sub)
	}
	return cmd
}
