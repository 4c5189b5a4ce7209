package agent

import (
	"context"

	"github.com/berth-mcp/berth/internal/agent/session"
	"github.com/berth-mcp/berth/internal/wire"
)

// backend gives the MCP tools the same implementations the REST routes
// use, so both surfaces behave identically.
type backend struct{ a *Agent }

func (b backend) CreateFile(ctx context.Context, req wire.CreateFileRequest) (wire.FileResult, error) {
	return b.a.editor.CreateFile(ctx, req)
}

func (b backend) EditFile(ctx context.Context, req wire.EditFileRequest) (wire.FileResult, error) {
	return b.a.editor.EditFile(ctx, req)
}

func (b backend) PatchFile(ctx context.Context, req wire.PatchFileRequest) (wire.FileResult, error) {
	return b.a.editor.PatchFile(ctx, req)
}

func (b backend) ReadFile(ctx context.Context, req wire.ReadFileRequest) (wire.ReadResult, error) {
	offset, limit := req.Offset, req.Limit
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = 2000
	}
	return b.a.ws.Read(ctx, req.Path, offset, limit, true)
}

func (b backend) Bash(ctx context.Context, id string, req wire.SessionExecRequest) (wire.BashResult, error) {
	if id == "" {
		id = "default"
	}
	if err := session.ValidID(id); err != nil {
		return wire.BashResult{}, err
	}
	return b.a.sessions.Exec(ctx, id, req)
}
