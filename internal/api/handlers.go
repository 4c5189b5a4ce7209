package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/wire"
)

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
