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
	Method string `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
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
		var c rpcCall
		if json.Unmarshal(trimmed, &c) != nil {
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
		var c rpcCall
		if dec.Decode(&c) != nil {
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
