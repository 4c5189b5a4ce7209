package agent

import (
	"net/http"

	"github.com/berth-mcp/berth/internal/agent/session"
	"github.com/berth-mcp/berth/internal/wire"
)

func (a *Agent) sessionExec() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.SessionExecRequest) (any, error) {
		id := r.PathValue("id")
		if err := session.ValidID(id); err != nil {
			return nil, err
		}
		return a.sessions.Exec(r.Context(), id, req)
	})
}

func (a *Agent) listSessions() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		list := a.sessions.List()
		if list == nil {
			list = []wire.SessionInfo{}
		}
		return wire.SessionList{Sessions: list}, nil
	})
}

func (a *Agent) deleteSession() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		id := r.PathValue("id")
		if err := session.ValidID(id); err != nil {
			return nil, err
		}
		if err := a.sessions.Delete(r.Context(), id); err != nil {
			return nil, err
		}
		return map[string]string{"id": id, "status": "deleted"}, nil
	})
}

// resetSessions ends every session; the orchestrator calls it when a
// finished sandbox is handed out again with reuse strategy RESET.
func (a *Agent) resetSessions() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		if err := a.sessions.Reset(r.Context()); err != nil {
			return nil, err
		}
		return map[string]string{"status": "reset"}, nil
	})
}
