package agent

import (
	"net/http"

	"github.com/berth-mcp/berth/internal/wire"
)

func (a *Agent) health() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, wire.Health{Status: "ok"})
	})
}

// features lists what this agent build serves, so a server can check
// before it relies on one.
var features = []string{"bash", "bash-stream", "sessions", "fs", "archive", "file-tools", "rewards", "mcp", "mcp-gateway"}

func (a *Agent) capabilities() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		ups := a.gateway.Upstreams()
		if ups == nil {
			ups = []wire.UpstreamInfo{}
		}
		return wire.Capabilities{
			Version:   a.cfg.Version,
			Workspace: a.cfg.Workspace,
			Features:  features,
			Upstreams: ups,
			Isolation: a.cfg.Isolation,
		}, nil
	})
}

func (a *Agent) shutdownHandler() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		a.log.Info("shutdown requested through the API")
		a.requestShutdown()
		return map[string]string{"status": "shutting down"}, nil
	})
}

func (a *Agent) notFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, a.log, r, wire.Errorf(wire.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}
