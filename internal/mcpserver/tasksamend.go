package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// amend runs the SDK's handler for one JSON request and rewrites the
// result of its answer with edit before passing it on. An answer that is
// not a plain JSON result (an error, an event stream) passes unchanged.
func (s *Server) amend(w http.ResponseWriter, r *http.Request, next http.Handler, c *amendCache) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.status == http.StatusOK && strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		if amended, ok := c.amend(body); ok {
			body = amended
			rec.header.Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

func amendResult(body []byte, edit func(map[string]json.RawMessage) error) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return nil, false
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(msg["result"], &result) != nil || result == nil {
		return nil, false
	}
	if edit(result) != nil {
		return nil, false
	}
	b, err := json.Marshal(result)
	if err != nil {
		return nil, false
	}
	msg["result"] = b
	out, err := json.Marshal(msg)
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

// tasksCapability is the server's tasks capability of 2025-11-25: tasks
// for tools/call, listed and cancellable.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// declareTasks adds the tasks capability to an initialize result.
func declareTasks(result map[string]json.RawMessage) error {
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(result["capabilities"], &caps); err != nil {
		return err
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["tasks"] = tasksCapability
	b, err := json.Marshal(caps)
	result["capabilities"] = b
	return err
}

// taskSupport is a task tool's execution: tasks are optional, a plain
// call still answers as before.
var taskSupport = json.RawMessage(`{"taskSupport":"optional"}`)

// markTaskTools sets execution.taskSupport on the task tools of a
// tools/list result (the go-sdk's Tool has no such field).
func (s *Server) markTaskTools(result map[string]json.RawMessage) error {
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(result["tools"], &tools); err != nil {
		return err
	}
	for _, t := range tools {
		var name string
		_ = json.Unmarshal(t["name"], &name)
		if _, ok := s.taskOps[name]; ok {
			t["execution"] = taskSupport
		}
	}
	b, err := json.Marshal(tools)
	result["tools"] = b
	return err
}

// recorder keeps an answer of the SDK to amend it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
