package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// serverToolCall is the body of POST /api/servers/{id}/mcp/call.
type serverToolCall struct {
	ToolName  string         `json:"tool_name" jsonschema:"tool name as listed by GET /api/servers/{id}/mcp/tools"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments"`
}

func queryInt64(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, wire.Errorf(wire.CodeBadRequest, "query parameter %s: want an integer, got %q", name, v)
	}
	return n, nil
}

func (s *server) serverOperations() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		limit, err := queryInt64(r, "limit")
		if err != nil {
			return nil, err
		}
		return s.svc.ServerOperations(r.Context(), principal(r), chi.URLParam(r, "id"), int(limit))
	})
}

func (s *server) listFiles() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		recursive := false
		if v := r.URL.Query().Get("recursive"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, wire.Errorf(wire.CodeBadRequest, "query parameter recursive: want true or false, got %q", v)
			}
			recursive = b
		}
		return s.svc.ListFiles(r.Context(), principal(r), orchestrator.ListFilesRequest{
			ServerID: chi.URLParam(r, "id"), Path: r.URL.Query().Get("path"), Recursive: recursive,
		})
	})
}

func (s *server) readFile() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		offset, err := queryInt64(r, "offset")
		if err != nil {
			return nil, err
		}
		limit, err := queryInt64(r, "limit")
		if err != nil {
			return nil, err
		}
		return s.svc.ReadFile(r.Context(), principal(r), orchestrator.ReadFileRequest{
			ServerID: chi.URLParam(r, "id"), Path: r.URL.Query().Get("path"), Offset: offset, Limit: limit,
		})
	})
}

func (s *server) writeFile() http.Handler {
	return withBody(s, func(r *http.Request, req wire.WriteFileRequest) (any, error) {
		return s.svc.WriteFile(r.Context(), principal(r), orchestrator.WriteFileRequest{ServerID: chi.URLParam(r, "id"), WriteFileRequest: req})
	})
}

func (s *server) createFile() http.Handler {
	return withBody(s, func(r *http.Request, req wire.CreateFileRequest) (any, error) {
		return s.svc.CreateFile(r.Context(), principal(r), orchestrator.CreateFileRequest{ServerID: chi.URLParam(r, "id"), CreateFileRequest: req})
	})
}

func (s *server) editFile() http.Handler {
	return withBody(s, func(r *http.Request, req wire.EditFileRequest) (any, error) {
		return s.svc.EditFile(r.Context(), principal(r), orchestrator.EditFileRequest{ServerID: chi.URLParam(r, "id"), EditFileRequest: req})
	})
}

func (s *server) patchFile() http.Handler {
	return withBody(s, func(r *http.Request, req wire.PatchFileRequest) (any, error) {
		return s.svc.PatchFile(r.Context(), principal(r), orchestrator.PatchFileRequest{ServerID: chi.URLParam(r, "id"), PatchFileRequest: req})
	})
}

func (s *server) listServerTools() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.ListServerTools(r.Context(), principal(r), orchestrator.ServerToolsRequest{ServerID: chi.URLParam(r, "id")})
	})
}

func (s *server) callServerTool() http.Handler {
	return withBody(s, func(r *http.Request, req serverToolCall) (any, error) {
		return s.svc.CallServerTool(r.Context(), principal(r), orchestrator.CallServerToolRequest{
			ServerID: chi.URLParam(r, "id"), ToolName: req.ToolName, Arguments: req.Arguments,
		})
	})
}

func (s *server) forwardRequest() http.Handler {
	return withBody(s, func(r *http.Request, req orchestrator.ForwardRequest) (any, error) {
		return s.svc.ForwardRequest(r.Context(), principal(r), req)
	})
}

func (s *server) buildImages() http.Handler {
	return withBody(s, func(r *http.Request, req orchestrator.BuildImagesRequest) (any, error) {
		return s.svc.BuildImages(r.Context(), principal(r), req)
	})
}

func (s *server) jobStatus() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		wait, err := waitSeconds(r)
		if err != nil {
			return nil, err
		}
		return s.svc.GetJobStatus(r.Context(), principal(r), orchestrator.JobStatusRequest{JobName: chi.URLParam(r, "name"), WaitSeconds: wait})
	})
}
