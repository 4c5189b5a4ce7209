package edit

import (
	"strconv"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// hunkLine is one body line of a hunk: op is ' ', '-' or '+'. noEOL is set
// by a following "\ No newline at end of file" marker.
type hunkLine struct {
	op    byte
	text  string
	noEOL bool
}

// hunk is one "@@ -l,s +l,s @@" block of a unified diff.
type hunk struct {
	index    int    // 1-based position in the patch
	header   string // the @@ line as written, without a final "\r"
	headerCR bool   // the @@ line ended in "\r\n"
	line     int    // line of the header in the patch
	oldStart int
	oldCount int
	newStart int
	newCount int
	lines    []hunkLine
}

// maxHunkNumber bounds the numbers in a hunk header; anything larger
// cannot describe a file the editor accepts and would only risk overflow.
const maxHunkNumber = 1 << 30

// parsePatch parses a unified diff for one file. Lines before the first
// "---" or "@@" (git's "diff --git", "index", a commit message) are
// skipped; everything after must be hunks of one file.
func parsePatch(patch string) ([]hunk, error) {
	lines := strings.Split(patch, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var (
		hunks      []hunk
		cur        *hunk
		oldLeft    int
		newLeft    int
		fileHeader bool
		diffLines  int
	)
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		n := i + 1
		if cur != nil && (oldLeft > 0 || newLeft > 0) {
			// An empty line is an empty context line whose leading space
			// an editor or mail client stripped.
			op, text := byte(' '), line
			if line != "" && line != "\r" {
				op, text = line[0], line[1:]
			}
			switch op {
			case ' ':
				if oldLeft == 0 || newLeft == 0 {
					return nil, countError(n, cur, line)
				}
				oldLeft--
				newLeft--
			case '-':
				if oldLeft == 0 {
					return nil, countError(n, cur, line)
				}
				oldLeft--
			case '+':
				if newLeft == 0 {
					return nil, countError(n, cur, line)
				}
				newLeft--
			case '\\':
				if err := markNoEOL(n, cur); err != nil {
					return nil, err
				}
				continue
			default:
				return nil, wire.Errorf(wire.CodeBadRequest,
					"patch line %d: hunk %d (%s) is cut short: it still needs %d old and %d new lines, but the line %s starts with none of ' ', '-', '+'",
					n, cur.index, cur.header, oldLeft, newLeft, quote(line))
			}
			cur.lines = append(cur.lines, hunkLine{op: op, text: text})
			continue
		}

		header := strings.TrimSuffix(line, "\r")
		switch {
		case cur != nil && strings.HasPrefix(line, "\\"):
			if err := markNoEOL(n, cur); err != nil {
				return nil, err
			}
		case strings.HasPrefix(header, "@@"):
			h, err := parseHunkHeader(n, header)
			if err != nil {
				return nil, err
			}
			h.index = len(hunks) + 1
			h.headerCR = header != line
			hunks = append(hunks, h)
			cur = &hunks[len(hunks)-1]
			oldLeft, newLeft = h.oldCount, h.newCount
		case strings.HasPrefix(line, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			if fileHeader || len(hunks) > 0 {
				return nil, multiFileError(n)
			}
			fileHeader = true
			i++
		case strings.HasPrefix(line, "--- "):
			if len(hunks) > 0 {
				return nil, trailingError(n, cur, line)
			}
			if fileHeader {
				return nil, noHunkHeaderError(n, line)
			}
			return nil, wire.Errorf(wire.CodeBadRequest,
				"patch line %d: file header %s is not followed by a \"+++ \" line", n, quote(line))
		case strings.HasPrefix(line, "+++ "):
			if len(hunks) > 0 {
				return nil, trailingError(n, cur, line)
			}
			return nil, wire.Errorf(wire.CodeBadRequest,
				"patch line %d: file header %s has no \"--- \" line before it", n, quote(line))
		case strings.HasPrefix(line, "diff "):
			diffLines++
			if fileHeader || len(hunks) > 0 || diffLines > 1 {
				return nil, multiFileError(n)
			}
		case line == "-- " && len(hunks) > 0:
			// The signature separator of git format-patch ends the diff.
			i = len(lines)
		case len(hunks) == 0 && !fileHeader:
			// Preamble before the diff proper.
		case len(hunks) == 0:
			return nil, noHunkHeaderError(n, line)
		case strings.TrimSpace(line) == "":
			// Blank lines between or after hunks carry nothing.
		default:
			return nil, trailingError(n, cur, line)
		}
	}
	if len(hunks) == 0 {
		return nil, wire.Errorf(wire.CodeBadRequest, "patch has no hunks: expected a line like \"@@ -1,3 +1,4 @@\"")
	}
	if oldLeft > 0 || newLeft > 0 {
		return nil, wire.Errorf(wire.CodeBadRequest,
			"hunk %d (%s) is cut short: the patch ends while the header still expects %d old and %d new lines",
			cur.index, cur.header, oldLeft, newLeft)
	}
	return hunks, nil
}

func markNoEOL(n int, cur *hunk) error {
	if len(cur.lines) == 0 {
		return wire.Errorf(wire.CodeBadRequest,
			"patch line %d: \"\\ No newline at end of file\" marker in hunk %d (%s) follows no line", n, cur.index, cur.header)
	}
	cur.lines[len(cur.lines)-1].noEOL = true
	return nil
}

func countError(n int, cur *hunk, line string) error {
	return wire.Errorf(wire.CodeBadRequest,
		"patch line %d: hunk %d (%s) has more lines than its header counts (-%d,%d +%d,%d); line %s does not fit",
		n, cur.index, cur.header, cur.oldStart, cur.oldCount, cur.newStart, cur.newCount, quote(line))
}

func noHunkHeaderError(n int, line string) error {
	return wire.Errorf(wire.CodeBadRequest,
		"patch line %d: expected a hunk header \"@@ -start,count +start,count @@\" after the file header, found %s",
		n, quote(line))
}

func trailingError(n int, cur *hunk, line string) error {
	if cur == nil {
		return wire.Errorf(wire.CodeBadRequest, "patch line %d: unexpected %s", n, quote(line))
	}
	return wire.Errorf(wire.CodeBadRequest,
		"patch line %d: unexpected %s after hunk %d (%s), which its header says is complete; are the header's counts too small?",
		n, quote(line), cur.index, cur.header)
}

func multiFileError(n int) error {
	return wire.Errorf(wire.CodeBadRequest,
		"patch line %d: a second file's header; patch_file applies a patch to one file only, send one call per file", n)
}

// parseHunkHeader parses "@@ -l[,s] +l[,s] @@[ section]".
func parseHunkHeader(n int, header string) (hunk, error) {
	bad := func(why string) (hunk, error) {
		return hunk{}, wire.Errorf(wire.CodeBadRequest,
			"patch line %d: malformed hunk header %s: %s; want \"@@ -start,count +start,count @@\"", n, quote(header), why)
	}
	rest, ok := strings.CutPrefix(header, "@@ -")
	if !ok {
		return bad("it does not start with \"@@ -\"")
	}
	oldPart, rest, ok := strings.Cut(rest, " +")
	if !ok {
		return bad("no \" +\" before the new range")
	}
	newPart, _, ok := strings.Cut(rest, " @@")
	if !ok {
		return bad("no closing \" @@\"")
	}
	h := hunk{header: header, line: n}
	var err error
	if h.oldStart, h.oldCount, err = parseRange(oldPart); err != nil {
		return bad("old range " + quote(oldPart) + " " + err.Error())
	}
	if h.newStart, h.newCount, err = parseRange(newPart); err != nil {
		return bad("new range " + quote(newPart) + " " + err.Error())
	}
	if h.oldCount == 0 && h.newCount == 0 {
		return bad("both counts are 0")
	}
	return h, nil
}

type rangeError string

func (e rangeError) Error() string { return string(e) }

func parseRange(s string) (start, count int, err error) {
	startText, countText, hasCount := strings.Cut(s, ",")
	if start, err = parseNumber(startText); err != nil {
		return 0, 0, err
	}
	count = 1
	if hasCount {
		if count, err = parseNumber(countText); err != nil {
			return 0, 0, err
		}
	}
	if start == 0 && count > 0 {
		return 0, 0, rangeError("starts at line 0 but has lines")
	}
	return start, count, nil
}

func parseNumber(s string) (int, error) {
	if s == "" || len(s) > 10 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, rangeError("is not a pair of non-negative numbers")
	}
	v, err := strconv.Atoi(s)
	if err != nil || v > maxHunkNumber {
		return 0, rangeError("has a number that is too large")
	}
	return v, nil
}

// quote quotes s for an error message, shortening long lines so that one
// bad line cannot flood the answer.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
