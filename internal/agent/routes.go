package agent

import "net/http"

// Handler returns the agent's HTTP API. Every route but GET /api/health
// requires the bearer token.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /api/health", a.health())

	api := http.NewServeMux()
	api.Handle("GET /api/capabilities", a.capabilities())
	api.Handle("POST /api/shutdown", a.shutdownHandler())

	api.Handle("POST /api/tools/bash", a.runBash())
	api.Handle("POST /api/tools/bash/stream", a.runBashStream())
	api.Handle("POST /api/tools/file/create", a.createFile())
	api.Handle("POST /api/tools/file/edit", a.editFile())
	api.Handle("POST /api/tools/file/patch", a.patchFile())
	api.Handle("POST /api/rewards/test", a.runTests())
	api.Handle("DELETE /api/operations/{id}", a.releaseOperation())

	api.Handle("GET /api/sessions", a.listSessions())
	api.Handle("DELETE /api/sessions", a.resetSessions())
	api.Handle("POST /api/sessions/{id}/exec", a.sessionExec())
	api.Handle("DELETE /api/sessions/{id}", a.deleteSession())

	api.Handle("GET /api/fs/ls", a.listFiles())
	api.Handle("GET /api/fs/cat", a.readFile())
	api.Handle("POST /api/fs/write", a.writeFile())
	api.Handle("POST /api/fs/mkdir", a.mkdir())
	api.Handle("DELETE /api/fs/rm", a.remove())
	api.Handle("GET /api/fs/archive", a.downloadArchive())
	api.Handle("PUT /api/fs/archive", a.uploadArchive())

	api.Handle("/mcp", a.gateway.Handler())
	api.Handle("/", a.notFound())

	mux.Handle("/", a.requireToken(api))
	return mux
}
