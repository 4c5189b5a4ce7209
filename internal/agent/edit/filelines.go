package edit

import (
	"bytes"
	"strings"
)

// fileLines indexes the lines of the content a patch applies to, without
// copying it.
type fileLines struct {
	content []byte
	starts  []int
	stripCR bool // compare file lines without the "\r" of a "\r\n"
}

func newFileLines(content []byte) *fileLines {
	f := &fileLines{content: content}
	if len(content) > 0 {
		f.starts = make([]int, 0, bytes.Count(content, []byte{'\n'})+1)
		f.starts = append(f.starts, 0)
		for i, c := range content {
			if c == '\n' && i+1 < len(content) {
				f.starts = append(f.starts, i+1)
			}
		}
	}
	return f
}

func (f *fileLines) n() int { return len(f.starts) }

// raw returns line i with its terminator, if it has one.
func (f *fileLines) raw(i int) []byte {
	end := len(f.content)
	if i+1 < len(f.starts) {
		end = f.starts[i+1]
	}
	return f.content[f.starts[i]:end]
}

// key returns line i as a patch line spells it.
func (f *fileLines) key(i int) []byte {
	b := f.raw(i)
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if f.stripCR {
			b = bytes.TrimSuffix(b, []byte{'\r'})
		}
	}
	return b
}

func (f *fileLines) hasTerm(i int) bool {
	b := f.raw(i)
	return len(b) > 0 && b[len(b)-1] == '\n'
}

// oldSide returns the lines a hunk expects in the file.
func oldSide(h *hunk, stripCR bool) []hunkLine {
	old := make([]hunkLine, 0, len(h.lines))
	for _, l := range h.lines {
		if l.op != '+' {
			if stripCR {
				l.text = strings.TrimSuffix(l.text, "\r")
			}
			old = append(old, l)
		}
	}
	return old
}
