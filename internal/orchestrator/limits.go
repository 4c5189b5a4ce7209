package orchestrator

import (
	"github.com/berth-mcp/berth/internal/wire"
)

// What berth keeps of what sandboxes produce. Root in a sandbox can
// always answer in its agent's place, so an agent's answer is untrusted
// input: whatever it says, berth's memory and its database stay bounded.
// One number, Config.MaxOutputBytes, bounds any one piece of sandbox
// content berth keeps (a command's stdout or stderr, a file read, a
// forwarded body); every answer berth reads whole is bounded by a limit
// derived from it, and reading stops there with a bad_gateway error.

// DefaultMaxOutputBytes is Config.MaxOutputBytes by default: 4 MiB per
// stream.
const DefaultMaxOutputBytes = 4 << 20

// DefaultMaxAnswerMemory is Config.MaxAnswerMemory by default: with the
// copies decoding makes, berth's peak stays under 300 MB whatever its
// sandboxes answer at once.
const DefaultMaxAnswerMemory = 96 << 20

const (
	// jsonExpansion is the most JSON text one byte of a string can take:
	// a control character or an invalid byte is six (\u0001, \ufffd).
	// Command output is fitted to wire.OutputJSONFit instead.
	jsonExpansion = 6
	// answerSlack is room for an answer's other fields and a truncation
	// marker next to its sandbox content.
	answerSlack = 64 << 10
	// markerSlack is how much longer than its limit a stream the agent
	// truncated may be: head, marker line, tail.
	markerSlack = 1 << 10
	// maxServerTools bounds the tools berth lists of one server: an MCP
	// server can page for ever.
	maxServerTools = 10000
)

// outputLimit resolves a checked max_output_bytes against the cap: absent
// is wire's default, null ("unlimited" in IdeGYM) and anything above the
// cap are the cap. The agent is always sent the result, never null.
func (s *Service) outputLimit(o wire.OptionalInt64) int64 {
	c := s.cfg.MaxOutputBytes
	switch {
	case !o.Set:
		return min(wire.DefaultMaxOutputBytes, c)
	case o.Null:
		return c
	default:
		return min(o.Value, c)
	}
}

// outputAnswerLimit bounds a bash answer carrying two streams of at most
// perStream bytes each, fitted by the agent (wire.FitOutput).
func outputAnswerLimit(perStream int64) int64 {
	return 2*wire.OutputJSONFit*(perStream+markerSlack) + answerSlack
}

// contentAnswerLimit bounds an answer carrying one piece of sandbox
// content (a file read, a listing, an MCP message).
func (s *Service) contentAnswerLimit() int64 { return contentLimit(s.cfg.MaxOutputBytes) }

func contentLimit(maxOutput int64) int64 { return jsonExpansion*maxOutput + answerSlack }
