package agent

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/berth-mcp/berth/internal/wire"
)

func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	return wire.DecodeJSON(w, r, limit, v)
}

func encode(w http.ResponseWriter, status int, v any) { wire.WriteJSON(w, status, v) }

// writeError answers with the status err's code calls for. Internal
// errors are logged; their text still goes to the caller because the only
// caller is the orchestrator acting for the sandbox's owner, and the
// detail is what lets an agent act on it.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	if wire.WriteError(w, err) >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// handle adapts a function returning (value, error) into a handler that
// encodes the value with 200 or the error with its status.
func (a *Agent) handle(fn func(r *http.Request, w http.ResponseWriter) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r, w)
		writeAnswer(w, a.log, r, v, err)
	})
}

// writeAnswer encodes v with 200, or err with its status.
func writeAnswer(w http.ResponseWriter, log *slog.Logger, r *http.Request, v any, err error) {
	if err != nil {
		writeError(w, log, r, err)
		return
	}
	encode(w, http.StatusOK, v)
}

// jsonHandler decodes the body into a Req and calls fn.
func jsonHandler[Req any](a *Agent, fn func(r *http.Request, req Req) (any, error)) http.Handler {
	return a.handle(func(r *http.Request, w http.ResponseWriter) (any, error) {
		var req Req
		if err := decode(w, r, a.cfg.MaxRequestBytes, &req); err != nil {
			return nil, err
		}
		return fn(r, req)
	})
}

func queryBool(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, wire.Errorf(wire.CodeBadRequest, "query parameter %s: want true or false, got %q", name, v)
	}
}

func queryInt(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || fmt.Sprint(n) != v {
		return 0, wire.Errorf(wire.CodeBadRequest, "query parameter %s: want an integer, got %q", name, v)
	}
	return n, nil
}
