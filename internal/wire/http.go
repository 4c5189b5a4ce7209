package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// DecodeJSON reads one JSON object from the request body into v, reading
// at most limit bytes. Unknown fields, wrong types, trailing data and
// oversized bodies are coded errors that name the problem, so a caller
// can fix the request without guessing.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return DecodeError(err)
	}
	return endOfObject(dec)
}

// DecodeStrict decodes the JSON object b into v as DecodeJSON does a
// request body: unknown fields, wrong types and trailing data are coded
// errors naming the problem.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return DecodeError(err)
	}
	return endOfObject(dec)
}

func endOfObject(dec *json.Decoder) error {
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
	case err != nil:
		// Reading past the object failed: too large, or malformed.
		return DecodeError(err)
	default:
		return Errorf(CodeBadRequest, "request body has data after the JSON object")
	}
	return nil
}

// DecodeError turns an encoding/json error into a coded error that names
// the field and what was wrong with it.
func DecodeError(err error) error {
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return Errorf(CodeTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(CodeBadRequest, "malformed JSON: the body ends in the middle of a value")
	case errors.Is(err, io.EOF):
		return Errorf(CodeBadRequest, "request body is empty; want a JSON object")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return Errorf(CodeBadRequest, "request body must be a JSON object, got %s", typeErr.Value)
		}
		return Errorf(CodeBadRequest, "field %q: want %s, got %s", typeErr.Field, typeWord(typeErr.Type), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return Errorf(CodeBadRequest, "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Errorf(CodeBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		var d *ErrorDetail
		if errors.As(err, &d) {
			return err
		}
		return Errorf(CodeBadRequest, "invalid request body: %v", err)
	}
}

// JSONAppender is a value that encodes itself as Marshal would, faster
// or with less memory (see AppendString).
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// WriteJSON writes v as JSON with the given status, without HTML
// escaping (see Marshal).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if a, ok := v.(JSONAppender); ok {
		if b, err := a.AppendJSON(nil); err == nil {
			w.WriteHeader(status)
			_, _ = w.Write(append(b, '\n'))
			return
		}
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Marshal is json.Marshal without HTML escaping: berth's JSON is served
// as application/json, never inside HTML, and escaping <, > and & in six
// bytes each would multiply the size of output that holds markup.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// RetryAfterUnavailable is the Retry-After of a 503: what berth reports
// as unavailable (its database restarting, a sandbox still starting)
// passes in seconds.
const RetryAfterUnavailable = 2 * time.Second

// AgentTokenHeader carries the agent token where Authorization cannot:
// through the Kubernetes API server's pod proxy, which takes
// Authorization for itself and removes it. The agent accepts either.
const AgentTokenHeader = "Berth-Agent-Token"

// WriteError answers with the status and {error:{code,message}} that
// err's code calls for, and returns the status. A 503 says when to retry,
// unless the caller set Retry-After already.
func WriteError(w http.ResponseWriter, err error) int {
	d := DetailOf(err)
	status := StatusOf(d.Code)
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfterUnavailable/time.Second)))
	}
	WriteJSON(w, status, Error{Error: d})
	return status
}

// typeWord names what a Go type holds in JSON's words, for callers who
// write JSON rather than Go.
func typeWord(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
