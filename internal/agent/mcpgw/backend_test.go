package mcpgw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// dirBackend is a small but real Backend for this package's tests only: it
// works on a real directory with os functions and runs real bash. The
// agent's real backends live in other packages.
type dirBackend struct{ root string }

func (b dirBackend) resolve(p string) (string, error) {
	if p == "" {
		return "", wire.Errorf(wire.CodeBadRequest, "path is required")
	}
	if filepath.IsAbs(p) || !filepath.IsLocal(p) {
		return "", wire.Errorf(wire.CodeBadRequest, "path %q must stay inside the workspace", p)
	}
	return filepath.Join(b.root, p), nil
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(s, "\n")[:strings.Count(strings.TrimSuffix(s, "\n"), "\n")+1]
}

func (b dirBackend) CreateFile(_ context.Context, req wire.CreateFileRequest) (wire.FileResult, error) {
	full, err := b.resolve(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	if _, err := os.Stat(full); err == nil && !req.Overwrite {
		return wire.FileResult{}, wire.Errorf(wire.CodeConflict, "create %s: file exists; set overwrite to replace it", req.Path)
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return wire.FileResult{}, fmt.Errorf("create %s: %w", req.Path, err)
	}
	if err := os.WriteFile(full, []byte(req.Content), 0o644); err != nil {
		return wire.FileResult{}, fmt.Errorf("create %s: %w", req.Path, err)
	}
	return wire.FileResult{Path: req.Path, Bytes: int64(len(req.Content)), Lines: len(splitLines(req.Content))}, nil
}

func (b dirBackend) EditFile(_ context.Context, req wire.EditFileRequest) (wire.FileResult, error) {
	full, err := b.resolve(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return wire.FileResult{}, wire.Errorf(wire.CodeNotFound, "edit %s: %w", req.Path, err)
	}
	lines := splitLines(string(data))
	if req.StartLine < 1 || req.EndLine < req.StartLine-1 || req.EndLine > len(lines) {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "edit %s: lines %d..%d out of range 1..%d", req.Path, req.StartLine, req.EndLine, len(lines))
	}
	var out []string
	out = append(out, lines[:req.StartLine-1]...)
	out = append(out, splitLines(req.NewContent)...)
	out = append(out, lines[req.EndLine:]...)
	content := strings.Join(out, "")
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		return wire.FileResult{}, fmt.Errorf("edit %s: %w", req.Path, err)
	}
	return wire.FileResult{Path: req.Path, Bytes: int64(len(content)), Lines: len(out)}, nil
}

// PatchFile applies the hunks of a unified diff, checking every context and
// removed line, and writes nothing unless all hunks apply.
func (b dirBackend) PatchFile(_ context.Context, req wire.PatchFileRequest) (wire.FileResult, error) {
	full, err := b.resolve(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return wire.FileResult{}, wire.Errorf(wire.CodeNotFound, "patch %s: %w", req.Path, err)
	}
	old := splitLines(string(data))
	var out []string
	pos := 0 // next unconsumed line of old
	hunks := 0
	plines := strings.Split(strings.TrimSuffix(req.Patch, "\n"), "\n")
	for i := 0; i < len(plines); i++ {
		l := plines[i]
		if !strings.HasPrefix(l, "@@ ") {
			continue
		}
		hunks++
		spec := strings.Fields(l)[1] // -start[,count]
		start, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(spec, "-"), ",", 2)[0])
		if err != nil || start-1 < pos || start-1 > len(old) {
			return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "patch %s: hunk %d: bad header %q", req.Path, hunks, l)
		}
		out = append(out, old[pos:start-1]...)
		pos = start - 1
		for i+1 < len(plines) && !strings.HasPrefix(plines[i+1], "@@ ") {
			i++
			body := plines[i]
			if body == "" {
				body = " "
			}
			text := body[1:] + "\n"
			switch body[0] {
			case ' ', '-':
				if pos >= len(old) || old[pos] != text {
					return wire.FileResult{}, wire.Errorf(wire.CodeConflict, "patch %s: hunk %d does not apply at line %d", req.Path, hunks, pos+1)
				}
				if body[0] == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			}
		}
	}
	if hunks == 0 {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "patch %s: no hunks in patch", req.Path)
	}
	out = append(out, old[pos:]...)
	content := strings.Join(out, "")
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		return wire.FileResult{}, fmt.Errorf("patch %s: %w", req.Path, err)
	}
	return wire.FileResult{Path: req.Path, Bytes: int64(len(content)), Lines: len(out)}, nil
}

func (b dirBackend) ReadFile(_ context.Context, req wire.ReadFileRequest) (wire.ReadResult, error) {
	full, err := b.resolve(req.Path)
	if err != nil {
		return wire.ReadResult{}, err
	}
	data, err := os.ReadFile(full)
	if errors.Is(err, os.ErrNotExist) {
		return wire.ReadResult{}, wire.Errorf(wire.CodeNotFound, "read %s: no such file", req.Path)
	}
	if err != nil {
		return wire.ReadResult{}, fmt.Errorf("read %s: %w", req.Path, err)
	}
	offset, limit := req.Offset, req.Limit
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = 2000
	}
	lines := splitLines(string(data))
	end := min(offset-1+limit, int64(len(lines)))
	var content string
	if offset-1 < end {
		content = strings.Join(lines[offset-1:end], "")
	}
	return wire.ReadResult{
		Path: req.Path, Content: content, Size: int64(len(data)), Offset: offset,
		Returned: max(end-(offset-1), 0), TotalLines: int64(len(lines)), EOF: end == int64(len(lines)),
	}, nil
}

// Bash runs the command with real bash. It has no persistent sessions; the
// session name is exported as BERTH_SESSION so tests can see it arrived.
func (b dirBackend) Bash(ctx context.Context, session string, req wire.SessionExecRequest) (wire.BashResult, error) {
	if req.Command == "" {
		return wire.BashResult{}, wire.Errorf(wire.CodeBadRequest, "command is required")
	}
	timeout := 60 * time.Second
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", req.Command)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "BERTH_SESSION="+session)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := wire.BashResult{Stdout: stdout.String(), Stderr: stderr.String(), DurationMS: time.Since(start).Milliseconds()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.ExitCode = true, -1
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case err != nil:
		return wire.BashResult{}, fmt.Errorf("run bash: %w", err)
	}
	return res, nil
}
