package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// waitRequest is the optional body of calls that return an operation.
type waitRequest struct {
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) for the operation to finish"`
}

// readyResponse is the answer of GET /readyz.
type readyResponse struct {
	Status    string `json:"status"`
	Runtime   string `json:"runtime"`
	Isolation string `json:"isolation" jsonschema:"what a sandbox can and cannot do, in plain words"`
	// Confined is false only when the operator asked for unconfined
	// sandboxes; Warning then says so.
	Confined bool   `json:"confined"`
	Warning  string `json:"warning,omitempty"`
}

type logsResponse struct {
	ServerID string `json:"server_id"`
	Logs     string `json:"logs"`
}

func (s *server) whoami() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.Whoami(r.Context(), principal(r))
	})
}

func (s *server) registerClient() http.Handler {
	return withBody(s, func(r *http.Request, req orchestrator.RegisterClientRequest) (any, error) {
		return s.svc.RegisterClient(r.Context(), principal(r), req)
	})
}

func (s *server) listClients() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.ListClients(r.Context(), principal(r))
	})
}

func (s *server) getClient() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.GetClient(r.Context(), principal(r), chi.URLParam(r, "id"))
	})
}

func (s *server) heartbeatClient() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.HeartbeatClient(r.Context(), principal(r), chi.URLParam(r, "id"))
	})
}

func (s *server) finishClient() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.FinishClient(r.Context(), principal(r), chi.URLParam(r, "id"))
	})
}

func (s *server) stopClient() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.StopClient(r.Context(), principal(r), chi.URLParam(r, "id"))
	})
}

func (s *server) startServer() http.Handler {
	return withBody(s, func(r *http.Request, req orchestrator.StartServerRequest) (any, error) {
		return s.svc.StartServer(r.Context(), principal(r), req)
	})
}

func (s *server) listServers() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.ListServers(r.Context(), principal(r), r.URL.Query().Get("client_id"))
	})
}

func (s *server) getServer() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.GetServer(r.Context(), principal(r), chi.URLParam(r, "id"))
	})
}

func (s *server) finishServer() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.FinishServer(r.Context(), principal(r), orchestrator.ServerRef{ServerID: chi.URLParam(r, "id")})
	})
}

func (s *server) stopServer() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		return s.svc.StopServer(r.Context(), principal(r), orchestrator.ServerRef{ServerID: chi.URLParam(r, "id")})
	})
}

// restartServer takes an optional body: an empty one means no waiting.
func (s *server) restartServer() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req waitRequest
		if r.ContentLength != 0 {
			if err := wire.DecodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		op, err := s.svc.RestartServer(r.Context(), principal(r), orchestrator.ServerRef{ServerID: chi.URLParam(r, "id")}, req.WaitSeconds)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, op)
	})
}

func (s *server) serverLogs() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		tail := 200
		if v := r.URL.Query().Get("tail"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, wire.Errorf(wire.CodeBadRequest, "query parameter tail: want a positive integer, got %q", v)
			}
			tail = n
		}
		id := chi.URLParam(r, "id")
		logs, err := s.svc.ServerLogs(r.Context(), principal(r), id, tail)
		return logsResponse{ServerID: id, Logs: logs}, err
	})
}

func (s *server) runBash() http.Handler {
	return withBody(s, func(r *http.Request, req orchestrator.RunBashRequest) (any, error) {
		id := chi.URLParam(r, "id")
		if req.ServerID != "" && req.ServerID != id {
			return nil, wire.Errorf(wire.CodeBadRequest, "server_id %q in the body does not match %q in the path", req.ServerID, id)
		}
		req.ServerID = id
		return s.svc.RunBashCommand(r.Context(), principal(r), req)
	})
}

func (s *server) sessionExec() http.Handler {
	return withBody(s, func(r *http.Request, req wire.SessionExecRequest) (any, error) {
		return s.svc.SessionExec(r.Context(), principal(r), chi.URLParam(r, "id"), chi.URLParam(r, "session"), req)
	})
}

func (s *server) getOperation() http.Handler {
	return s.handle(func(r *http.Request) (any, error) {
		wait, err := waitSeconds(r)
		if err != nil {
			return nil, err
		}
		return s.svc.GetOperation(r.Context(), principal(r), chi.URLParam(r, "id"), wait)
	})
}

// waitSeconds reads the query parameter wait_seconds (0 when absent).
func waitSeconds(r *http.Request) (float64, error) {
	v := r.URL.Query().Get("wait_seconds")
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, wire.Errorf(wire.CodeBadRequest, "query parameter wait_seconds: want a number, got %q", v)
	}
	return f, nil
}

// forward proxies into the server's agent after the service said yes.
func (s *server) forward() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := chi.URLParam(r, "*")
		t, err := s.svc.ForwardTarget(r.Context(), principal(r), chi.URLParam(r, "client_id"), chi.URLParam(r, "server_id"), path)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.svc.Forwarder().ServeHTTP(w, r, t, path)
	})
}

func (s *server) healthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.Health{Status: "ok"})
	}
}

func (s *server) readyz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := s.svc.Ready(ctx); err != nil {
			wire.WriteError(w, wire.Errorf(wire.CodeUnavailable, "not ready: %v", err))
			return
		}
		info := s.svc.RuntimeInfo()
		res := readyResponse{Status: "ok", Runtime: info.Name, Isolation: info.Isolation, Confined: info.Confined}
		if !info.Confined {
			res.Warning = "sandboxes run unconfined: any code in one can read berth's data and key, reach its database and every other sandbox"
		}
		wire.WriteJSON(w, http.StatusOK, res)
	}
}
