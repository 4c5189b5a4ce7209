package wire

import (
	"strings"
	"unicode/utf8"
)

// Output as JSON text. max_output_bytes counts raw bytes, but output
// travels and is kept as JSON text, where a byte can take six (a control
// character is \u0001, an invalid byte \ufffd): binary output would cost
// six times what text does, three times over where a result is nested in
// IdeGYM's JSON strings. So each stream of a BashResult may take at most
// OutputJSONFit times its limit in JSON text; text never comes near that
// (quotes, backslashes, newlines and tabs take two bytes, anything else
// one per byte), and output that does is trimmed further, keeping head
// and tail around one marker that names everything omitted. The agent
// fits what it answers, and berth what it keeps.
const OutputJSONFit = 2

// FitOutput trims both streams of res, kept with a limit of limit bytes
// each (negative: none, and nothing is trimmed), to their share of JSON
// text.
func FitOutput(res *BashResult, limit int64) {
	if limit < 0 {
		return
	}
	res.Stdout, res.StdoutTruncatedBytes = fitStream(res.Stdout, res.StdoutTruncatedBytes, OutputJSONFit*limit)
	res.Stderr, res.StderrTruncatedBytes = fitStream(res.Stderr, res.StderrTruncatedBytes, OutputJSONFit*limit)
}

// fitStream returns s with at most most bytes of JSON text besides its
// marker, and how many bytes are now omitted in all.
func fitStream(s string, omitted, most int64) (string, int64) {
	// The agent's marker, when there is one, splits head from tail.
	head, tail, marked := "", "", false
	if omitted > 0 {
		head, tail, marked = strings.Cut(s, OmittedMarker(omitted))
	}
	if !marked {
		head, tail = s, ""
	}
	if jsonLen(head)+jsonLen(tail) <= most {
		return s, omitted
	}
	if !marked {
		mid := len(s) / 2
		for mid < len(s) && !utf8.RuneStart(s[mid]) {
			mid++
		}
		head, tail = s[:mid], s[mid:]
	}
	h, t := prefixWithin(head, most/2), suffixWithin(tail, most/2)
	omitted += int64(len(head) - h + len(tail) - t)
	return head[:h] + OmittedMarker(omitted) + tail[len(tail)-t:], omitted
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

// prefixWithin returns the length of the longest prefix of s whose JSON
// text fits in room bytes.
func prefixWithin(s string, room int64) int {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if room -= jsonCost(r, size); room < 0 {
			break
		}
		i += size
	}
	return i
}

// suffixWithin returns the length of the longest suffix of s whose JSON
// text fits in room bytes.
func suffixWithin(s string, room int64) int {
	j := len(s)
	for j > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if room -= jsonCost(r, size); room < 0 {
			break
		}
		j -= size
	}
	return len(s) - j
}
