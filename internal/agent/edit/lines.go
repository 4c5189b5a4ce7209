package edit

import (
	"bytes"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// EditLines replaces lines start..end (1-indexed, inclusive) of content with
// the lines of newContent. end = start-1 inserts before line start without
// removing anything; start may be one past the last line to append.
//
// Lines outside the range keep their bytes. New lines get the file's line
// ending (that of its first line, "\n" when it has none), and the file keeps
// ending, or not ending, with a newline (except that an empty last line
// needs its newline to exist). A trailing newline in newContent
// ends its last line rather than adding an empty one, and an empty
// newContent deletes the range.
func EditLines(content []byte, start, end int, newContent string) ([]byte, error) {
	total := countLines(content)
	if err := checkRange(start, end, total); err != nil {
		return nil, err
	}
	eol := detectEOL(content)
	finalNL := len(content) == 0 || content[len(content)-1] == '\n'
	ins := splitNewContent(newContent)

	a := skipLines(content, 0, start-1)
	b := skipLines(content, a, end-(start-1))
	prefix, suffix := content[:a], content[b:]

	var buf bytes.Buffer
	buf.Grow(len(prefix) + len(newContent) + len(ins)*len(eol) + len(suffix) + len(eol))
	buf.Write(prefix)
	// Appending to a file whose last line has no newline: that line now
	// has a successor, so it needs one.
	if len(ins) > 0 && len(prefix) > 0 && prefix[len(prefix)-1] != '\n' {
		buf.WriteString(eol)
	}
	for i, l := range ins {
		buf.WriteString(l)
		// An empty last line only exists with a newline after it, so it
		// gets one even in a file that did not end with a newline.
		if i < len(ins)-1 || len(suffix) > 0 || finalNL || l == "" {
			buf.WriteString(eol)
		}
	}
	if len(ins) == 0 && len(suffix) == 0 && !finalNL {
		// The removed range held the unterminated last line; the line
		// before it becomes last and takes over "no newline at end",
		// unless it is empty and would vanish with its newline.
		if out := trimTerminator(buf.Bytes()); len(out) > 0 && out[len(out)-1] != '\n' {
			buf.Truncate(len(out))
		}
	}
	buf.Write(suffix)
	return buf.Bytes(), nil
}

// checkRange validates an edit_file range against a file of total lines.
func checkRange(start, end, total int) error {
	if start < 1 || start > total+1 {
		return wire.Errorf(wire.CodeBadRequest,
			"start_line %d is out of range: the file has %d lines, so start_line must be between 1 and %d (%d appends after the last line)",
			start, total, total+1, total+1)
	}
	if end < start-1 || end > total {
		return wire.Errorf(wire.CodeBadRequest,
			"end_line %d is out of range for start_line %d: end_line must be between %d (insert before line %d, removing nothing) and %d (the file has %d lines)",
			end, start, start-1, start, total, total)
	}
	return nil
}

// countLines counts lines the way an editor shows them: a final line
// without a newline still counts, an empty file has none.
func countLines(content []byte) int {
	n := bytes.Count(content, []byte{'\n'})
	if len(content) > 0 && content[len(content)-1] != '\n' {
		n++
	}
	return n
}

// skipLines returns the offset just after k more lines starting at offset
// from, or len(content) if the content ends first.
func skipLines(content []byte, from, k int) int {
	pos := from
	for i := 0; i < k && pos < len(content); i++ {
		j := bytes.IndexByte(content[pos:], '\n')
		if j < 0 {
			return len(content)
		}
		pos += j + 1
	}
	return pos
}

// detectEOL returns the line ending of the first terminated line.
func detectEOL(content []byte) string {
	i := bytes.IndexByte(content, '\n')
	if i > 0 && content[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// trimTerminator removes one trailing "\n" or "\r\n".
func trimTerminator(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// splitNewContent splits edit_file's new_content into lines without their
// terminators; "\r\n" counts as one terminator so that the file's own style
// is applied when the lines are written back.
func splitNewContent(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		// Every part but a final unterminated one was followed by "\n".
		if i < len(parts)-1 || strings.HasSuffix(s, "\n") {
			parts[i] = strings.TrimSuffix(parts[i], "\r")
		}
	}
	return parts
}
