package console

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// What a sandbox wrote (command output, file contents, logs, results) is
// hostile and may be huge: pages show a bounded part of it, as text that
// html/template escapes (nothing here is ever template.HTML).
const (
	maxShownOutput = 64 << 10 // each stream of a command, a file, a log tail
	maxShownResult = 4 << 10  // an operation's result or error in a table
)

// Clipped is text cut to a size for a page, with how much was left out.
type Clipped struct {
	Text    string
	Omitted int
}

// clip keeps the first max bytes of s, cut at a character boundary.
func clip(s string, max int) Clipped {
	if len(s) <= max {
		return Clipped{Text: s}
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return Clipped{Text: s[:cut], Omitted: len(s) - cut}
}

// clipTail keeps the last max bytes of s (the end of a log matters most).
func clipTail(s string, max int) Clipped {
	if len(s) <= max {
		return Clipped{Text: s}
	}
	cut := len(s) - max
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return Clipped{Text: s[cut:], Omitted: cut}
}

// resultText is an operation's result as indented JSON, clipped.
func resultText(raw json.RawMessage) Clipped {
	if len(raw) == 0 {
		return Clipped{}
	}
	if len(raw) <= 64<<10 {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") == nil {
			return clip(buf.String(), maxShownResult)
		}
	}
	return clip(string(raw), maxShownResult)
}
