package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// decode reads one JSON object from the request body into v. Unknown
// fields, wrong types, trailing data and oversized bodies are errors that
// name the problem, so a caller can fix the request without guessing.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return wire.Errorf(wire.CodeBadRequest, "request body has data after the JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return wire.Errorf(wire.CodeTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, io.EOF):
		return wire.Errorf(wire.CodeBadRequest, "request body is empty; want a JSON object")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return wire.Errorf(wire.CodeBadRequest, "request body must be a JSON object, got %s", typeErr.Value)
		}
		return wire.Errorf(wire.CodeBadRequest, "field %q: want %s, got %s", field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return wire.Errorf(wire.CodeBadRequest, "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return wire.Errorf(wire.CodeBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return wire.Errorf(wire.CodeBadRequest, "invalid request body: %v", err)
	}
}

// encode writes v as JSON with the given status.
func encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with the status and {error:{code,message}} that err's
// code calls for. Internal errors are logged; their text still goes to the
// caller because the only caller is the orchestrator acting for the
// sandbox's owner, and the detail is what lets an agent act on it.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	d := wire.DetailOf(err)
	status := wire.StatusOf(d.Code)
	if status >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	encode(w, status, wire.Error{Error: d})
}

// handle adapts a function returning (value, error) into a handler that
// encodes the value with 200 or the error with its status.
func (a *Agent) handle(fn func(r *http.Request, w http.ResponseWriter) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r, w)
		if err != nil {
			writeError(w, a.log, r, err)
			return
		}
		encode(w, http.StatusOK, v)
	})
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
