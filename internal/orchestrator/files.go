package orchestrator

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// File operations on a server's workspace. Each checks exec rights (files
// are what berth:exec covers), records activity, and relays to the
// server's agent, whose errors (403 for paths leaving the workspace, 409
// for a hunk that does not apply) keep their codes.

// ListFilesRequest lists a directory of a server's workspace.
type ListFilesRequest struct {
	ServerID  string `json:"server_id" jsonschema:"the server"`
	Path      string `json:"path,omitempty" jsonschema:"directory relative to the workspace (default .)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list subdirectories too (depth first, capped)"`
}

// ReadFileRequest reads lines of a file in a server's workspace.
type ReadFileRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Path     string `json:"path" jsonschema:"file path relative to the workspace"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"first line to return, 1-indexed (default 1)"`
	Limit    int64  `json:"limit,omitempty" jsonschema:"number of lines to return (default 2000)"`
}

// WriteFileRequest writes a whole file in a server's workspace.
type WriteFileRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	wire.WriteFileRequest
}

// EditFileRequest replaces a line range of a file in a server's workspace.
type EditFileRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	wire.EditFileRequest
}

// PatchFileRequest applies a unified diff to a file in a server's
// workspace.
type PatchFileRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	wire.PatchFileRequest
}

// CreateFileRequest creates a file in a server's workspace.
type CreateFileRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	wire.CreateFileRequest
}

// execServer loads a server for an exec-class call and checks it runs.
func (s *Service) execServer(ctx context.Context, p rbac.Principal, id string) (store.Server, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerExec, id, "")
	if err != nil {
		return store.Server{}, err
	}
	if _, err := s.target(ctx, srv); err != nil {
		return store.Server{}, err
	}
	return srv, nil
}

// relay calls the agent for the file operation tool, within a file
// call's deadline, reading at most limit bytes of its answer, and audits
// mutations.
func (s *Service) relay(ctx context.Context, p rbac.Principal, serverID, tool, method, path, action string, in, out any, limit int64) error {
	srv, err := s.execServer(ctx, p, serverID)
	if err != nil {
		return err
	}
	err = s.callAgent(ctx, srv, s.fileCall(tool), method, path, in, out, limit)
	if action != "" {
		s.audit(ctx, p, action, "server", srv.ID, srv.Namespace, outcome(err), nil)
	}
	if err == nil {
		s.touch(ctx, srv)
	}
	return err
}

// ListFiles lists a directory in a server's workspace.
func (s *Service) ListFiles(ctx context.Context, p rbac.Principal, req ListFilesRequest) (wire.ListResult, error) {
	q := url.Values{"path": {req.Path}, "recursive": {strconv.FormatBool(req.Recursive)}}
	if req.Path == "" {
		q.Set("path", ".")
	}
	var out wire.ListResult
	err := s.relay(ctx, p, req.ServerID, "list_files", http.MethodGet, "api/fs/ls?"+q.Encode(), "", nil, &out, s.contentAnswerLimit())
	return out, err
}

// ReadFile reads lines of a file in a server's workspace.
func (s *Service) ReadFile(ctx context.Context, p rbac.Principal, req ReadFileRequest) (wire.ReadResult, error) {
	if req.Path == "" {
		return wire.ReadResult{}, wire.Errorf(wire.CodeBadRequest, "path is required")
	}
	if req.Offset <= 0 {
		req.Offset = 1
	}
	if req.Limit <= 0 {
		req.Limit = 2000
	}
	// The agent caps the content at the output cap, so its whole answer
	// fits the limit berth reads.
	q := url.Values{"path": {req.Path}, "lines": {"true"}, "max_bytes": {strconv.FormatInt(s.cfg.MaxOutputBytes, 10)},
		"offset": {strconv.FormatInt(req.Offset, 10)}, "limit": {strconv.FormatInt(req.Limit, 10)}}
	var out wire.ReadResult
	err := s.relay(ctx, p, req.ServerID, "read_file", http.MethodGet, "api/fs/cat?"+q.Encode(), "", nil, &out, s.contentAnswerLimit())
	return out, err
}

// WriteFile writes a file in a server's workspace atomically.
func (s *Service) WriteFile(ctx context.Context, p rbac.Principal, req WriteFileRequest) (wire.FileResult, error) {
	var out wire.FileResult
	err := s.relay(ctx, p, req.ServerID, "write_file", http.MethodPost, "api/fs/write", "server.file.write", req.WriteFileRequest, &out, maxSmallAnswer)
	return out, err
}

// CreateFile creates a file (refusing to overwrite unless asked).
func (s *Service) CreateFile(ctx context.Context, p rbac.Principal, req CreateFileRequest) (wire.FileResult, error) {
	var out wire.FileResult
	err := s.relay(ctx, p, req.ServerID, "create_file", http.MethodPost, "api/tools/file/create", "server.file.create", req.CreateFileRequest, &out, maxSmallAnswer)
	return out, err
}

// EditFile replaces a line range of a file.
func (s *Service) EditFile(ctx context.Context, p rbac.Principal, req EditFileRequest) (wire.FileResult, error) {
	var out wire.FileResult
	err := s.relay(ctx, p, req.ServerID, "edit_file", http.MethodPost, "api/tools/file/edit", "server.file.edit", req.EditFileRequest, &out, maxSmallAnswer)
	return out, err
}

// PatchFile applies a unified diff to a file; a hunk that does not apply
// changes nothing and says which hunk and why.
func (s *Service) PatchFile(ctx context.Context, p rbac.Principal, req PatchFileRequest) (wire.FileResult, error) {
	var out wire.FileResult
	err := s.relay(ctx, p, req.ServerID, "patch_file", http.MethodPost, "api/tools/file/patch", "server.file.patch", req.PatchFileRequest, &out, maxSmallAnswer)
	return out, err
}
