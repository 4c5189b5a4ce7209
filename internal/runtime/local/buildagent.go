//go:build linux

package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/wire"
)

// buildAgent is how a build talks to the agent of its sandbox: the runtime
// drives the build itself, so that a build is one call of BuildImage.
// Everything the agent answers is untrusted (root in the sandbox can
// answer in its place), so every answer is read with a limit.
type buildAgent struct {
	client *http.Client
	token  string
}

func newBuildAgent(sock, token string) *buildAgent {
	return &buildAgent{token: token, client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		// No timeouts here: a command takes as long as it takes, and the
		// build's context bounds it.
	}}}
}

func (a *buildAgent) close() { a.client.CloseIdleConnections() }

// Limits of what a build keeps of a command's output and reads of an
// answer: two streams of buildOutputBytes fitted to at most twice that in
// JSON text each, plus the answer's other fields.
const (
	buildOutputBytes = 64 << 10
	buildAnswerBytes = 4*buildOutputBytes + 64<<10
)

// bash runs one command of a build in the workspace and returns the
// agent's answer. The command runs under `set -e`, as a Dockerfile's RUN
// usually does, so a failing step in a multi-line command fails it.
func (a *buildAgent) bash(ctx context.Context, command string, timeout time.Duration) (wire.BashResult, error) {
	secs := timeout.Seconds()
	req := wire.BashRequest{Command: "set -e\n" + command, CommandTimeout: &secs, MaxOutputBytes: wire.Int64(buildOutputBytes)}
	var res wire.BashResult
	err := a.call(ctx, "api/tools/bash", req, &res, buildAnswerBytes)
	return res, err
}

// buildFileTimeout bounds writing one of a build's files: a hung agent
// fails the build then, not at the build's deadline. (A command's call is
// bounded by the build's deadline, its own timeout plus a margin.)
const buildFileTimeout = 30 * time.Second

// writeFile writes one of the build's files, creating its parents. The
// agent resolves the path inside the workspace through os.Root.
func (a *buildAgent) writeFile(ctx context.Context, path, content string) error {
	ctx, cancel := context.WithTimeout(ctx, buildFileTimeout)
	defer cancel()
	var res wire.FileResult
	return a.call(ctx, "api/fs/write", wire.WriteFileRequest{Path: path, Content: content, MakeParents: true}, &res, 64<<10)
}

func (a *buildAgent) call(ctx context.Context, path string, body, out any, limit int64) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	forward.PrepareHeader(req.Header, a.token)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("read the agent's answer: %w", err)
	}
	if int64(len(raw)) > limit {
		return fmt.Errorf("the agent's answer is longer than %d bytes", limit)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.Error
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("the agent refused it (%s): %s", e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("the agent answered %d", resp.StatusCode)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the agent's answer: %w", err)
	}
	return nil
}
