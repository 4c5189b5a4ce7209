package wire

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// AppendString appends s to b as a JSON string, exactly as Marshal writes
// it, growing b once to the final size. encoding/json grows its buffer
// step by step, which for a string of megabytes (command output nested in
// an operation's result) leaves several times its size behind for the
// garbage collector.
func AppendString(b []byte, s string) []byte {
	b = slices.Grow(b, StringLen(s))
	b = append(b, '"')
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				if c < 0x20 {
					b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
				} else {
					b = append(b, c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028':
			b = append(b, `\u2028`...)
		case r == '\u2029':
			b = append(b, `\u2029`...)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

// StringLen is how many bytes AppendString writes for s, quotes included,
// so that a caller can size its buffer once.
func StringLen(s string) int { return int(jsonLen(s)) + 2 }

// AppendJSON appends r as Marshal encodes it, built at its final size
// (see AppendString): the streams are megabytes where the rest is a few
// numbers.
func (r BashResult) AppendJSON(b []byte) ([]byte, error) {
	small := r
	small.Stdout, small.Stderr = "", ""
	rest, err := Marshal(small)
	if err != nil {
		return nil, err
	}
	// The streams are the first two fields; should that change, Marshal
	// does it all.
	const streams = `{"stdout":"","stderr":""`
	if !bytes.HasPrefix(rest, []byte(streams)) {
		whole, err := Marshal(r)
		return append(b, whole...), err
	}
	rest = rest[len(streams):]
	b = slices.Grow(b, int(jsonLen(r.Stdout)+jsonLen(r.Stderr))+len(streams)+len(rest))
	b = append(b, `{"stdout":`...)
	b = AppendString(b, r.Stdout)
	b = append(b, `,"stderr":`...)
	b = AppendString(b, r.Stderr)
	return append(b, rest...), nil
}
