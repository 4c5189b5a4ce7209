package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// maxEventLine bounds one line of a streamed command's answer: berth caps
// each stream (4 MiB unless its operator raised it), and a line holds at
// most one stream's piece, as JSON.
const maxEventLine = 64 << 20

// streamExec runs a one-shot command through berth's streamed exec and
// copies its output to the user's stdout and stderr as it is written,
// returning its exit code as an error (nil for 0). wait bounds the whole
// call: the command's own timeout plus a margin.
func streamExec(ctx context.Context, e *env, r *remote, serverID string, in map[string]any, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	body, err := jsonBody(in)
	if err != nil {
		return fmt.Errorf("encode command: %w", err)
	}
	path := "/api/servers/" + url.PathEscape(serverID) + "/exec/stream"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+path, body)
	if err != nil {
		return wire.Errorf(wire.CodeBadRequest, "server URL %s: %v", r.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", wire.NDJSONType)
	resp, err := r.HTTP().Do(req)
	if err != nil {
		return r.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return answerError(r, http.MethodPost, path, resp.StatusCode, resp.Status, raw)
	}
	end, err := wire.ReadEvents(resp.Body, maxEventLine, func(ev wire.ExecEvent) error {
		w := e.stdout
		if ev.Stream == wire.StreamStderr {
			w = e.stderr
		}
		if _, err := io.WriteString(w, ev.Data); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return wire.Errorf(wire.CodeGatewayTimeout, "no end of the command on %s after %s: %v", serverID, wait, err)
		}
		return wire.Errorf(wire.CodeBadGateway, "output stream of %s%s broke: %v", r.URL, path, err)
	}
	if end.Error != nil {
		return wire.Errorf(end.Error.Code, "%s", end.Error.Message)
	}
	return printResult(e, wire.BashResult{
		ExitCode: *end.ExitCode, TimedOut: end.TimedOut,
		StdoutTruncatedBytes: end.StdoutTruncatedBytes, StderrTruncatedBytes: end.StderrTruncatedBytes,
	})
}
