package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/berth-mcp/berth/internal/agent/opruns"
	"github.com/berth-mcp/berth/internal/wire"
)

// operationHandler serves an endpoint whose requests berth ties to an
// operation (wire.Operation). Without an operation id a request is
// answered as by jsonHandler, and its command ends with it. With one, the
// command runs in the agent's table of runs (opruns), apart from the
// request: berth going away does not end it, a request that repeats the
// id gets the one run's answer, and the answer is kept until berth
// releases it (DELETE /api/operations/{id}).
func operationHandler[Req any](a *Agent, ref func(*Req) wire.Operation, fn func(ctx context.Context, req Req) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := decode(w, r, a.cfg.MaxRequestBytes, &req); err != nil {
			writeError(w, a.log, r, err)
			return
		}
		op := ref(&req)
		if op.OperationID == "" {
			v, err := fn(r.Context(), req)
			writeAnswer(w, a.log, r, v, err)
			return
		}
		if err := op.Check(); err != nil {
			writeError(w, a.log, r, err)
			return
		}
		ans, err := a.runs.Do(r.Context(), op.OperationID, time.Duration(op.OperationAgeMS)*time.Millisecond, func(ctx context.Context) opruns.Answer {
			v, err := fn(ctx, req)
			rec := &recorder{header: http.Header{}}
			// r outlives its handler here only to name the request in the
			// log, which reads its method and path.
			writeAnswer(rec, a.log, r, v, err)
			return opruns.Answer{Status: rec.status, Header: rec.header, Body: rec.body}
		})
		switch {
		case err != nil && r.Context().Err() != nil:
			// berth went away; the run goes on, and its answer waits for
			// the replica that takes the operation over.
		case err != nil:
			writeError(w, a.log, r, err)
		default:
			h := w.Header()
			for k, v := range ans.Header {
				h[k] = v
			}
			w.WriteHeader(ans.Status)
			_, _ = w.Write(ans.Body)
		}
	})
}

// releaseOperation is DELETE /api/operations/{id}: berth recorded the
// operation's outcome, or cancelled it; a command still running ends.
func (a *Agent) releaseOperation() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := (wire.Operation{OperationID: id}).Check(); err != nil || id == "" {
			writeError(w, a.log, r, wire.Errorf(wire.CodeBadRequest, "operation id: want letters, digits and hyphens, got %q", id))
			return
		}
		a.runs.Release(id)
		w.WriteHeader(http.StatusNoContent)
	})
}

// recorder is an http.ResponseWriter that keeps the answer written to it.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body = append(r.body, b...)
	return len(b), nil
}
