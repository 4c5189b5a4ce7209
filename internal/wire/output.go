package wire

import (
	"strings"
	"unicode/utf8"
)

// Output as JSON text. max_output_bytes counts bytes, but output travels
// and is kept as JSON text, where a byte can take six (a control
// character is \u0001, an invalid byte \ufffd) and comes back as up to
// three (an invalid byte decodes to U+FFFD): binary output would cost six
// times what text does in JSON, three times over where a result is nested
// in IdeGYM's JSON strings, and arrive three times longer than its limit.
// So each stream of a BashResult holds at most its limit in bytes as its
// receiver decodes them, and at most OutputJSONFit times its limit in JSON
// text; text never comes near the second (quotes, backslashes, newlines
// and tabs take two bytes, anything else one per byte), and output that
// passes either is trimmed further, keeping head and tail around one
// marker that names everything omitted. The agent fits what it answers,
// and berth what it keeps: output is never refused for its size.
const OutputJSONFit = 2

// FitOutput trims both streams of res, kept with a limit of limit bytes
// each (negative: none, and nothing is trimmed), to their limit and their
// share of JSON text, and sets Truncated when either stream lost bytes.
func FitOutput(res *BashResult, limit int64) {
	if limit >= 0 {
		room := budget{bytes: limit, json: OutputJSONFit * limit}
		res.Stdout, res.StdoutTruncatedBytes = fitStream(res.Stdout, res.StdoutTruncatedBytes, room)
		res.Stderr, res.StderrTruncatedBytes = fitStream(res.Stderr, res.StderrTruncatedBytes, room)
	}
	res.Truncated = res.StdoutTruncatedBytes > 0 || res.StderrTruncatedBytes > 0
}

// budget is what a stream may take: bytes as decoded from JSON, and bytes
// of JSON text.
type budget struct{ bytes, json int64 }

func (b budget) half() budget { return budget{b.bytes / 2, b.json / 2} }

// take charges the character r, size bytes of UTF-8, and reports whether
// it still fitted.
func (b *budget) take(r rune, size int) bool {
	b.bytes -= decodedCost(r, size)
	b.json -= jsonCost(r, size)
	return b.bytes >= 0 && b.json >= 0
}

// fitStream returns s with at most room besides its marker, and how many
// bytes are now omitted in all.
func fitStream(s string, omitted int64, room budget) (string, int64) {
	// The agent's marker, when there is one, splits head from tail.
	head, tail, marked := "", "", false
	if omitted > 0 {
		head, tail, marked = strings.Cut(s, OmittedMarker(omitted))
	}
	if !marked {
		head, tail = s, ""
	}
	if fits(head+tail, room) {
		return s, omitted
	}
	if !marked {
		mid := len(s) / 2
		for mid < len(s) && !utf8.RuneStart(s[mid]) {
			mid++
		}
		head, tail = s[:mid], s[mid:]
	}
	h, t := prefixWithin(head, room.half()), suffixWithin(tail, room.half())
	omitted += int64(len(head) - h + len(tail) - t)
	return head[:h] + OmittedMarker(omitted) + tail[len(tail)-t:], omitted
}

// decodedCost is how many bytes the character r, size bytes of UTF-8,
// takes once Marshal has written it and Unmarshal read it back: an
// invalid byte becomes U+FFFD.
func decodedCost(r rune, size int) int64 {
	if r == utf8.RuneError && size == 1 {
		return 3
	}
	return int64(size)
}

// jsonCost is how many bytes of JSON text the character r, size bytes of
// UTF-8, takes as Marshal writes it.
func jsonCost(r rune, size int) int64 {
	switch {
	case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
		return 6
	case r == '"', r == '\\', r == '\n', r == '\r', r == '\t', r == '\b', r == '\f':
		return 2
	case r < 0x20:
		return 6
	default:
		return int64(size)
	}
}

func jsonLen(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += jsonCost(r, size)
		i += size
	}
	return n
}

// fits reports whether all of s fits in room.
func fits(s string, room budget) bool { return prefixWithin(s, room) == len(s) }

// prefixWithin returns the length of the longest prefix of s that fits in
// room.
func prefixWithin(s string, room budget) int {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !room.take(r, size) {
			break
		}
		i += size
	}
	return i
}

// suffixWithin returns the length of the longest suffix of s that fits in
// room.
func suffixWithin(s string, room budget) int {
	j := len(s)
	for j > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if !room.take(r, size) {
			break
		}
		j -= size
	}
	return len(s) - j
}
