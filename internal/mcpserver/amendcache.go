package mcpserver

import (
	"bytes"
	"encoding/json"
	"sync"
)

// amendCache remembers the amended form of the SDK's results for one
// edit. The SDK encodes the same tools (or the same capabilities) the
// same way on every request, and amending a tools/list result decodes
// and re-encodes every schema, which cost more than the SDK's own answer;
// with the cache a repeated answer costs a comparison of its bytes.
type amendCache struct {
	edit func(map[string]json.RawMessage) error
	mu   sync.Mutex
	// amended maps a result as the SDK encoded it to its amended form.
	amended map[string][]byte
}

// maxAmendEntries bounds the cache. The results amended vary only with
// the negotiated protocol version (and a tools/list page), so a handful
// covers every client; past the bound results are amended uncached
// rather than letting callers grow berth's memory.
const maxAmendEntries = 16

func newAmendCache(edit func(map[string]json.RawMessage) error) *amendCache {
	return &amendCache{edit: edit, amended: map[string][]byte{}}
}

// messagePrefix is how the SDK starts every answer (jsonrpc2's
// wireCombined: jsonrpc, id, then result or error).
const messagePrefix = `{"jsonrpc":"2.0","id":`

// amend returns the SDK's answer body with its result amended, or false
// when the body is not a plain result to amend. The id is copied as the
// SDK wrote it; only the result is looked up and replaced.
func (c *amendCache) amend(body []byte) ([]byte, bool) {
	id, result, ok := splitAnswer(body)
	if !ok {
		return amendResult(body, c.edit)
	}
	c.mu.Lock()
	amended, hit := c.amended[string(result)]
	c.mu.Unlock()
	if !hit {
		var fields map[string]json.RawMessage
		if json.Unmarshal(result, &fields) != nil || fields == nil {
			// Not one object (say, a result followed by an error):
			// the general way decides.
			return amendResult(body, c.edit)
		}
		if c.edit(fields) != nil {
			return nil, false
		}
		b, err := json.Marshal(fields)
		if err != nil {
			return nil, false
		}
		amended = b
		c.mu.Lock()
		if len(c.amended) < maxAmendEntries {
			c.amended[string(result)] = amended
		}
		c.mu.Unlock()
	}
	out := make([]byte, 0, len(messagePrefix)+len(id)+len(`,"result":`)+len(amended)+2)
	out = append(out, messagePrefix...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, amended...)
	return append(out, "}\n"...), true
}

// splitAnswer finds the id and the result of an answer encoded as the SDK
// encodes one. ok is false for any other shape (an error, a reordered or
// unexpected message), which is then amended the slow, general way.
func splitAnswer(body []byte) (id, result []byte, ok bool) {
	if !bytes.HasPrefix(body, []byte(messagePrefix)) {
		return nil, nil, false
	}
	rest := body[len(messagePrefix):]
	dec := json.NewDecoder(bytes.NewReader(rest))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil, nil, false
	}
	id, rest = rest[:dec.InputOffset()], rest[dec.InputOffset():]
	rest, ok = bytes.CutPrefix(rest, []byte(`,"result":`))
	if !ok {
		return nil, nil, false
	}
	rest = bytes.TrimRight(rest, " \r\n\t")
	if len(rest) < 2 || rest[len(rest)-1] != '}' || rest[0] != '{' {
		return nil, nil, false
	}
	// result is the object before the message's closing brace, unless
	// the message holds more after it; such bytes never parse as one
	// object, so they are never cached, and amend's decoding on a miss
	// is the check (a hit equals bytes that parsed).
	return id, rest[:len(rest)-1], true
}
