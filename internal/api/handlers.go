package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/runtime"
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
	// Disk is present when the runtime keeps sandboxes on berth's data
	// directory (the local runtime).
	Disk *readyDisk `json:"disk,omitempty" jsonschema:"free space of the data directory, where sandboxes' volumes are allocated"`
}

// readyDisk is the data directory's free space as /readyz reports it.
type readyDisk struct {
	FreeBytes    int64  `json:"free_bytes"`
	ReserveBytes int64  `json:"reserve_bytes" jsonschema:"kept free for berth and the sandboxes it runs (--data-dir-reserve)"`
	Low          bool   `json:"low" jsonschema:"the free space is below the reserve: no new sandbox starts"`
	Message      string `json:"message,omitempty" jsonschema:"why new sandboxes are refused, when they are"`
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
		res.Disk = s.readyDisk(ctx)
		wire.WriteJSON(w, http.StatusOK, res)
	}
}

// readyDisk reports the data directory's space. Low space does not make
// berth unready: it still serves every sandbox it runs, and only refuses
// new ones.
func (s *server) readyDisk(ctx context.Context) *readyDisk {
	sp, ok, err := s.svc.DiskSpace(ctx)
	if !ok {
		return nil
	}
	if err != nil {
		return &readyDisk{Message: err.Error()}
	}
	d := &readyDisk{FreeBytes: sp.FreeBytes, ReserveBytes: sp.ReserveBytes, Low: sp.Low}
	if sp.Low {
		d.Message = fmt.Sprintf("berth's data directory has %s free, below its %s reserve (--data-dir-reserve): no new sandbox starts until space is freed",
			runtime.FormatBytes(sp.FreeBytes), runtime.FormatBytes(sp.ReserveBytes))
	}
	return d
}
