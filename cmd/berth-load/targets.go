package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxAnswer bounds what berth-load reads of one answer: the commands it
// runs print little, and a misbehaving server must not fill its memory.
const maxAnswer = 1 << 20

// berthTarget runs commands through berth: each caller has its own shell
// session on one of the servers berth-load started for the run.
type berthTarget struct {
	c         config
	http      *http.Client
	clientID  string
	serverIDs []string
	mcp       []*mcp.ClientSession
}

// server is caller i's server.
func (t *berthTarget) server(i int) string { return t.serverIDs[i%len(t.serverIDs)] }

func newBerthTarget(ctx context.Context, c config) (*berthTarget, error) {
	t := &berthTarget{c: c, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.callers}}}
	var client struct{ ID string }
	if err := t.rest(ctx, "POST", "/api/clients", map[string]any{"name": "berth-load"}, &client); err != nil {
		return nil, fmt.Errorf("register a client: %w", err)
	}
	t.clientID = client.ID
	for n := range c.servers {
		var op struct {
			Status, Error string
			ServerID      string `json:"server_id"`
		}
		req := map[string]any{"client_id": t.clientID, "image_tag": c.image, "server_name": fmt.Sprintf("load-%d", n), "wait_seconds": 120}
		if err := t.rest(ctx, "POST", "/api/servers", req, &op); err != nil {
			t.close()
			return nil, fmt.Errorf("start server %d of %d: %w", n+1, c.servers, err)
		}
		if op.Status != "SUCCEEDED" {
			t.close()
			return nil, fmt.Errorf("start server %d of %d: operation %s: %s", n+1, c.servers, op.Status, op.Error)
		}
		t.serverIDs = append(t.serverIDs, op.ServerID)
	}
	if c.surface == "mcp" {
		for range c.callers {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "berth-load", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint: c.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{c.token, t.http.Transport}},
			}, nil)
			if err != nil {
				t.close()
				return nil, fmt.Errorf("connect to %s/mcp: %w", c.url, err)
			}
			t.mcp = append(t.mcp, cs)
		}
	}
	return t, nil
}

func (t *berthTarget) call(ctx context.Context, i int) error {
	session := fmt.Sprintf("load-%d", i)
	switch t.c.surface {
	case "mcp":
		res, err := t.mcp[i].CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"server_id": t.server(i), "session": session, "command": t.c.command,
		}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("bash: %v", res.Content)
		}
		var out struct {
			ExitCode int `json:"exit_code"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || out.ExitCode != 0 {
			return fmt.Errorf("bash answered %s", b)
		}
		return nil
	case "oneshot":
		var op struct {
			Status, Error string
			Result        struct {
				ExitCode int `json:"exit_code"`
			}
		}
		if err := t.rest(ctx, "POST", "/api/servers/"+t.server(i)+"/bash", map[string]any{"command": t.c.command, "wait_seconds": 60}, &op); err != nil {
			return err
		}
		if op.Status != "SUCCEEDED" || op.Result.ExitCode != 0 {
			return fmt.Errorf("run_bash_command %s (%s), exit %d", op.Status, op.Error, op.Result.ExitCode)
		}
		return nil
	default:
		return t.rest(ctx, "POST", "/api/servers/"+t.server(i)+"/sessions/"+session+"/exec", map[string]any{"command": t.c.command}, nil)
	}
}

func (t *berthTarget) close() {
	for _, cs := range t.mcp {
		cs.Close()
	}
	if t.clientID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = t.rest(ctx, "DELETE", "/api/clients/"+t.clientID, nil, nil)
	}
}

// rest calls berth's REST API and decodes its answer into out; a non-200
// is an error with berth's message, and without out an answer with a
// non-zero exit_code is one too.
func (t *berthTarget) rest(ctx context.Context, method, path string, body, out any) error {
	return doJSON(ctx, t.http, method, t.c.url+path, t.c.token, body, out)
}

// exitResult is the part of a command's result berth-load checks.
type exitResult struct {
	ExitCode int `json:"exit_code"`
}

func doJSON(ctx context.Context, client *http.Client, method, url, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out == nil {
		var r exitResult
		if json.Unmarshal(raw, &r) == nil && r.ExitCode != 0 {
			return fmt.Errorf("%s %s: exit code %d", method, url, r.ExitCode)
		}
		return nil
	}
	return json.Unmarshal(raw, out)
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// agentTarget is bare berth-agents on this machine, one per server berth
// runs, unconfined and called directly: what a command costs without
// berth in the way. Caller i calls agent i mod agents, as it calls server
// i mod servers through berth.
type agentTarget struct {
	agents  []*agentProc
	http    *http.Client
	command string
	oneShot bool
}

// agentProc is one bare agent.
type agentProc struct {
	cmd   *exec.Cmd
	url   string
	token string
	dir   string
}

func startAgents(ctx context.Context, bin string, c config) (*agentTarget, error) {
	t := &agentTarget{command: c.command, oneShot: c.surface == "oneshot",
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.callers}}}
	for range c.servers {
		a, err := startAgent(ctx, bin, t.http)
		if err != nil {
			t.close()
			return nil, err
		}
		t.agents = append(t.agents, a)
	}
	return t, nil
}

func startAgent(ctx context.Context, bin string, client *http.Client) (*agentProc, error) {
	dir, err := os.MkdirTemp("", "berth-load-agent-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer lf.Close()
	a := &agentProc{url: "http://" + ln.Addr().String(), token: rand.Text() + rand.Text(), dir: dir}
	// Not tied to ctx: close ends it, after the last round.
	a.cmd = exec.Command(bin, "--listen", "fd:3", "--workspace", dir, "--isolation", "none: berth-load's baseline")
	a.cmd.Env = append(os.Environ(), "BERTH_AGENT_TOKEN="+a.token)
	a.cmd.ExtraFiles = []*os.File{lf}
	a.cmd.Stderr = io.Discard
	if err := a.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := doJSON(ctx, client, "GET", a.url+"/api/health", a.token, nil, nil); err == nil {
			return a, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			a.close()
			return nil, fmt.Errorf("the agent %s did not answer: %w", bin, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call runs the command the way the measured surface does: one-shot
// commands as the agent's one-shot bash, the rest in a persistent shell.
func (t *agentTarget) call(ctx context.Context, i int) error {
	a := t.agents[i%len(t.agents)]
	if t.oneShot {
		return doJSON(ctx, t.http, "POST", a.url+"/api/tools/bash", a.token, map[string]any{"command": t.command}, nil)
	}
	return doJSON(ctx, t.http, "POST", fmt.Sprintf("%s/api/sessions/load-%d/exec", a.url, i), a.token, map[string]any{"command": t.command}, nil)
}

func (t *agentTarget) close() {
	for _, a := range t.agents {
		a.close()
	}
}

func (a *agentProc) close() {
	if a.cmd.Process != nil {
		a.cmd.Process.Kill()
		a.cmd.Wait()
	}
	os.RemoveAll(a.dir)
}
