package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// maxBatch is the most messages one JSON-RPC batch may hold. Each message
// is answered in full and the answers are buffered together, so without a
// bound one 4 MiB body of 5000 tools/list calls made a 161 MB answer.
// Clients that batch at all send a handful (an initialize with its
// notification, a few calls).
const maxBatch = 20

// batchesRemoved is the first MCP version without JSON-RPC batching.
// Versions are dates, so they compare as strings.
const batchesRemoved = "2025-06-18"

// rpcCall is what berth reads of each message before the SDK sees it.
type rpcCall struct {
	Method string
	// Tool is params.name of a tools/call.
	Tool string
	// Args are params.arguments of a tools/call: which scopes a call
	// needs may depend on them (bash without server_id).
	Args json.RawMessage
	// WantsProgress is set when params._meta.progressToken is a string or
	// a number, the two kinds MCP allows.
	WantsProgress bool
}

// decodeCall reads one message. Keys match exactly, as in the SDK's own
// decoder (encoding/json would also take "NAME" for "name"), so berth
// and the SDK never disagree about which tool is called. ok is false for
// a message that is not a JSON object.
func decodeCall(raw []byte) (c rpcCall, ok bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return rpcCall{}, false
	}
	_ = json.Unmarshal(fields["method"], &c.Method)
	var params map[string]json.RawMessage
	if json.Unmarshal(fields["params"], &params) != nil {
		return c, true
	}
	_ = json.Unmarshal(params["name"], &c.Tool)
	c.Args = params["arguments"]
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) == nil {
		c.WantsProgress = isProgressToken(meta["progressToken"])
	}
	return c, true
}

// isProgressToken reports whether raw is a JSON string or number.
func isProgressToken(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// readCalls reads the messages of a POST body: one message, or a batch
// (a JSON array) of at most maxBatch, decoded one element at a time so
// an oversized batch is refused after maxBatch+1 elements. refusal is a
// message for the client when the batch may not be served; calls is nil
// for bodies that are not JSON-RPC, which pass through for the SDK to
// answer with its own error.
func readCalls(body []byte, protocolVersion string) (calls []rpcCall, refusal string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		c, ok := decodeCall(trimmed)
		if !ok {
			return nil, ""
		}
		return []rpcCall{c}, ""
	}
	if protocolVersion >= batchesRemoved {
		return nil, fmt.Sprintf("JSON-RPC batches are not part of MCP %s and later, and this request says MCP-Protocol-Version %s: send one message per POST", batchesRemoved, protocolVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return nil, ""
	}
	for dec.More() {
		if len(calls) == maxBatch {
			return nil, fmt.Sprintf("a JSON-RPC batch may hold at most %d messages; send the rest in further requests", maxBatch)
		}
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil, ""
		}
		c, ok := decodeCall(raw)
		if !ok {
			return nil, ""
		}
		calls = append(calls, c)
	}
	return calls, ""
}

// writeRPCError answers a POST that cannot be served with an HTTP 400 and
// a JSON-RPC error without an id, as the MCP transport asks for input a
// server cannot accept.
func writeRPCError(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": message},
	})
}

// codeInvalidRequest is JSON-RPC's "the message is not a valid request".
const codeInvalidRequest = -32600
