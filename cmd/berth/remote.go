package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// configFlag registers --config on a client command. An empty value means
// cliconfig.DefaultPath; BERTH_CONFIG also sets it (see envFallback).
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "config", "", "credentials file (default <user config dir>/berth/config.json)")
}

func configPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return cliconfig.DefaultPath()
}

// credentials returns the server and credentials the client commands
// use: BERTH_URL and BERTH_TOKEN when set (both, so that a token saved for
// one server is never sent to another), else the saved login.
func credentials(getenv func(string) string, cfgFlag string) (*remote, error) {
	envURL, envToken := getenv("BERTH_URL"), getenv("BERTH_TOKEN")
	if envURL != "" || envToken != "" {
		if envURL == "" || envToken == "" {
			return nil, wire.Errorf(wire.CodeUnauthorized, "set both BERTH_URL and BERTH_TOKEN, or neither to use the credentials saved by `berth login`")
		}
		u, err := cliconfig.NormalizeURL(envURL)
		if err != nil {
			return nil, fmt.Errorf("BERTH_URL: %w", err)
		}
		c := cliconfig.Config{URL: u, Token: strings.TrimSpace(envToken)}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("BERTH_TOKEN: %w", err)
		}
		return newRemote(c, ""), nil
	}
	path, err := configPath(cfgFlag)
	if err != nil {
		return nil, err
	}
	c, err := cliconfig.Load(path)
	if errors.Is(err, cliconfig.ErrNotLoggedIn) {
		return nil, wire.Errorf(wire.CodeUnauthorized, "no berth credentials: run `berth login --url URL` (or set BERTH_URL and BERTH_TOKEN)")
	}
	if err != nil {
		return nil, err
	}
	return newRemote(c, path), nil
}

// fetchWhoami asks the server who the token is. Its errors say whether
// the server was unreachable, not berth, or refused the token.
func fetchWhoami(ctx context.Context, c *remote) (orchestrator.Whoami, error) {
	var me orchestrator.Whoami
	if err := callAPI(ctx, c, http.MethodGet, "/api/whoami", nil, &me); err != nil {
		return me, err
	}
	if me.UserID == "" {
		return me, wire.Errorf(wire.CodeBadGateway, "%s does not look like a berth server: GET /api/whoami answered 200 without a berth identity", c.URL)
	}
	return me, nil
}

// callAPI sends one REST call with the saved credentials and decodes a
// 200 answer into out. Its errors say whether the server was
// unreachable, not berth, refused the token, or refused the call, with
// berth's own message.
func callAPI(ctx context.Context, c *remote, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := jsonBody(in)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", method, path, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return wire.Errorf(wire.CodeBadRequest, "server URL %s: %v", c.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return wire.Errorf(wire.CodeBadGateway, "read answer of %s%s: %w", c.URL, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return wire.Errorf(wire.CodeBadGateway, "%s does not look like a berth server: %s %s answered 200 with something that is not its JSON (%v)", c.URL, method, path, err)
		}
		return nil
	}
	return answerError(c, method, path, resp.StatusCode, resp.Status, raw)
}

// answerError is the error a user reads for a berth answer other than
// 200: what was refused, with berth's own message.
func answerError(c *remote, method, path string, status int, statusText string, raw []byte) error {
	var e wire.Error
	msg := ""
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		msg = ": " + e.Error.Message
	}
	switch status {
	case http.StatusUnauthorized:
		return wire.Errorf(wire.CodeUnauthorized, "berth at %s refused the token%s", c.URL, msg)
	case http.StatusForbidden:
		return wire.Errorf(wire.CodeForbidden, "berth at %s denied %s %s%s", c.URL, method, path, msg)
	case http.StatusNotFound:
		// A berth resource that is not there has a message; a route
		// that is not there means the URL is not a berth (or not its
		// root).
		if msg != "" && !strings.HasPrefix(msg, ": no route") {
			return wire.Errorf(wire.CodeNotFound, "%s", strings.TrimPrefix(msg, ": "))
		}
		return wire.Errorf(wire.CodeNotFound, "%s does not look like a berth server: %s %s answered 404 (check the URL)", c.URL, method, path)
	case http.StatusBadRequest:
		return wire.Errorf(wire.CodeBadRequest, "%s", strings.TrimPrefix(msg, ": "))
	}
	if msg == "" {
		return wire.Errorf(wire.CodeBadGateway, "%s %s%s answered %s", method, c.URL, path, statusText)
	}
	return wire.Errorf(wire.CodeBadGateway, "%s %s%s answered %s%s", method, c.URL, path, statusText, msg)
}
