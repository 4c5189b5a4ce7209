package agent

import (
	"context"
	"net/http"

	"github.com/berth-mcp/berth/internal/wire"
)

func (a *Agent) runBash() http.Handler {
	return operationHandler(a, func(req *wire.BashRequest) wire.Operation { return req.Operation },
		func(ctx context.Context, req wire.BashRequest) (any, error) { return a.bash.Run(ctx, req) })
}

func (a *Agent) createFile() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.CreateFileRequest) (any, error) {
		return a.editor.CreateFile(r.Context(), req)
	})
}

func (a *Agent) editFile() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.EditFileRequest) (any, error) {
		return a.editor.EditFile(r.Context(), req)
	})
}

func (a *Agent) patchFile() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.PatchFileRequest) (any, error) {
		return a.editor.PatchFile(r.Context(), req)
	})
}

func (a *Agent) runTests() http.Handler {
	return operationHandler(a, func(req *wire.RewardRequest) wire.Operation { return req.Operation },
		func(ctx context.Context, req wire.RewardRequest) (any, error) { return a.rewards.Test(ctx, req) })
}

// runBashStream runs a one-shot command and answers its output as NDJSON
// events while it runs (see bash.Runner.RunStream). A refusal before the
// first event is a JSON error as on every route.
func (a *Agent) runBashStream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.BashRequest
		if err := decode(w, r, a.cfg.MaxRequestBytes, &req); err != nil {
			writeError(w, a.log, r, err)
			return
		}
		ew := wire.NewEventWriter(w)
		err := a.bash.RunStream(r.Context(), req, ew.Send)
		if err != nil && !ew.Started() {
			writeError(w, a.log, r, err)
		}
	})
}
