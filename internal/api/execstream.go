package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// A streamed command answers NDJSON events as its output is written, so
// it is a route of its own rather than a JSON operation of the catalogue,
// which answers whole. The rule (authorization, exec slot, deadline,
// audit) is the service's; this adapter copies events and flushes each.

// execStream runs the one-shot command in the body on the server in the
// path. A refusal before the first event is a JSON error with its status;
// a failure after it is a final {"error":...} event, since the status has
// gone out.
func (s *server) execStream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req orchestrator.StreamBashRequest
		if err := wire.DecodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			s.fail(w, r, err)
			return
		}
		id := chi.URLParam(r, "server_id")
		if req.ServerID != "" && req.ServerID != id {
			s.fail(w, r, wire.Errorf(wire.CodeBadRequest, "server_id %q in the body differs from %q in the path", req.ServerID, id))
			return
		}
		req.ServerID = id
		ew := wire.NewEventWriter(w)
		end, err := s.svc.StreamBash(r.Context(), principal(r), req, ew.Send)
		switch {
		case err == nil:
			ew.Send(end)
		case !ew.Started():
			s.fail(w, r, err)
		default:
			d := wire.DetailOf(err)
			ew.Send(wire.ExecEvent{Error: &d})
		}
	})
}
