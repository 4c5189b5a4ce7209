package edit

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// HunkResult says where one hunk of a patch applied.
type HunkResult struct {
	Index  int    // 1-based position of the hunk in the patch
	Header string // the hunk's @@ line
	// Line is the 1-based line of the original file where the hunk's old
	// lines began; for a hunk without old lines, the line it inserted
	// after (0 for the top of the file).
	Line int
	// Offset is how many lines away from the header's stated position the
	// hunk matched, as GNU patch reports "Hunk #2 succeeded at 14 (offset
	// 3 lines)". 0 means it matched where the header said.
	Offset int
}

// Patched is the outcome of ApplyPatch.
type Patched struct {
	Content []byte
	Lines   int
	Hunks   []HunkResult
}

// ApplyUnifiedDiff applies a unified diff for ONE file to content. It
// returns the new content or an error naming the hunk (1-based index and
// its @@ header) and why it did not apply.
func ApplyUnifiedDiff(content []byte, patch string) ([]byte, error) {
	p, err := ApplyPatch(content, patch)
	if err != nil {
		return nil, err
	}
	return p.Content, nil
}

// ApplyPatch is ApplyUnifiedDiff that also reports where each hunk
// applied.
//
// Hunks apply in order. Each is tried where its header says (shifted by
// the offset the previous hunk needed), then at growing distances from
// there, never overlapping an earlier hunk; every context and removed line
// must match exactly. A malformed patch is a wire.CodeBadRequest error, a
// hunk that matches nowhere a wire.CodeConflict error.
//
// Line endings: lines are compared byte for byte, which reproduces what
// diff -u described. When the file uses "\r\n" and the patch carries no
// "\r" (a patch typed by an agent) and that fails, the patch is tried
// again ignoring the "\r" of the file's lines, with added lines ending in
// "\r\n". A patch converted to "\r\n" throughout, applied to a "\n" file,
// is tried with the patch's "\r" ignored first.
func ApplyPatch(content []byte, patch string) (Patched, error) {
	hunks, err := parsePatch(patch)
	if err != nil {
		return Patched{}, err
	}
	f := newFileLines(content)
	attempts := []lineMode{{eol: "\n"}}
	adapted, ok := adaptedMode(content, hunks)
	switch {
	case ok && adapted.stripPatchCR:
		attempts = []lineMode{adapted, attempts[0]}
	case ok:
		attempts = append(attempts, adapted)
	}
	var exactErr, adaptedErr error
	for _, mode := range attempts {
		p, err := apply(f, hunks, mode)
		if err == nil {
			return p, nil
		}
		if mode == adapted {
			adaptedErr = err
		} else {
			exactErr = err
		}
	}
	// The adapted attempt's error names a real difference in content
	// rather than one of line endings.
	if adaptedErr != nil {
		return Patched{}, adaptedErr
	}
	return Patched{}, exactErr
}

// lineMode says how file and patch lines are compared and how added lines
// end.
type lineMode struct {
	stripFileCR  bool // compare file lines without a "\r" before "\n"
	stripPatchCR bool // compare patch lines without a trailing "\r"
	eol          string
}

// apply applies hunks to f in mode.
func apply(f *fileLines, hunks []hunk, mode lineMode) (Patched, error) {
	f.stripCR = mode.stripFileCR
	w := lineWriter{eol: mode.eol}
	w.buf.Grow(len(f.content) + len(f.content)/8)
	results := make([]HunkResult, 0, len(hunks))
	prevEnd, carry := 0, 0
	for hi := range hunks {
		h := &hunks[hi]
		old := oldSide(h, mode.stripPatchCR)
		stated := h.oldStart - 1
		if len(old) == 0 {
			stated = h.oldStart
		}
		pos, err := f.locate(h, old, stated, stated+carry, prevEnd)
		if err != nil {
			return Patched{}, err
		}
		for i := prevEnd; i < pos; i++ {
			w.add(f.raw(i))
		}
		j := pos
		for _, l := range h.lines {
			switch l.op {
			case ' ':
				w.add(f.raw(j))
				j++
			case '-':
				j++
			case '+':
				text := l.text
				if mode.stripPatchCR {
					text = strings.TrimSuffix(text, "\r")
				}
				w.addText(text, l.noEOL)
			}
		}
		prevEnd = pos + len(old)
		carry = pos - stated
		line := pos + 1
		if len(old) == 0 {
			line = pos
		}
		results = append(results, HunkResult{Index: h.index, Header: h.header, Line: line, Offset: carry})
	}
	for i := prevEnd; i < f.n(); i++ {
		w.add(f.raw(i))
	}
	out := w.buf.Bytes()
	return Patched{Content: out, Lines: countLines(out), Hunks: results}, nil
}

// adaptedMode returns the mode for a patch whose line endings disagree
// with the file's: a "\r\n" file and a patch without any "\r" (typed by an
// agent), or a "\n" file and a patch converted to "\r\n" throughout, hunk
// headers included.
func adaptedMode(content []byte, hunks []hunk) (lineMode, bool) {
	anyCR, allCR := false, true
	for _, h := range hunks {
		allCR = allCR && h.headerCR
		for _, l := range h.lines {
			cr := strings.HasSuffix(l.text, "\r")
			anyCR = anyCR || cr || h.headerCR
			allCR = allCR && (cr || l.text == "")
		}
	}
	switch {
	case detectEOL(content) == "\r\n" && !anyCR:
		return lineMode{stripFileCR: true, eol: "\r\n"}, true
	case allCR && !bytes.Contains(content, []byte("\r\n")):
		return lineMode{stripPatchCR: true, eol: "\n"}, true
	}
	return lineMode{}, false
}

// matches reports whether old matches the file from line index pos.
func (f *fileLines) matches(old []hunkLine, pos int) bool {
	for j, l := range old {
		i := pos + j
		if string(f.key(i)) != l.text {
			return false
		}
		if l.noEOL && (i != f.n()-1 || f.hasTerm(i)) {
			return false
		}
	}
	return true
}

// locate finds where hunk h applies: at expected (the stated position
// shifted by the previous hunk's offset) or the nearest position to it at
// or after minPos, trying later positions first at equal distance as GNU
// patch does.
func (f *fileLines) locate(h *hunk, old []hunkLine, stated, expected, minPos int) (int, error) {
	n := f.n()
	if len(old) == 0 {
		// Nothing to match: a pure insertion goes where it is told.
		for _, p := range []int{expected, stated} {
			if p >= minPos && p <= n {
				return p, nil
			}
		}
		return 0, wire.Errorf(wire.CodeConflict,
			"hunk %d (%s) does not apply: it inserts after line %d, but the file has %d lines (and earlier hunks end at line %d)",
			h.index, h.header, stated, n, minPos)
	}
	maxPos := n - len(old)
	if maxPos >= minPos {
		e := min(max(expected, minPos), maxPos)
		for d := 0; e-d >= minPos || e+d <= maxPos; d++ {
			if p := e + d; p <= maxPos && f.matches(old, p) {
				return p, nil
			}
			if p := e - d; d > 0 && p >= minPos && f.matches(old, p) {
				return p, nil
			}
		}
	}
	where := fmt.Sprintf("its %d context and removed lines match nowhere else in lines %d-%d either", len(old), minPos+1, n)
	if maxPos < minPos {
		where = fmt.Sprintf("lines %d-%d are too few to hold its %d lines", minPos+1, n, len(old))
	}
	return 0, wire.Errorf(wire.CodeConflict, "hunk %d (%s) does not apply: %s; %s",
		h.index, h.header, f.mismatch(old, stated), where)
}

// mismatch describes the first line where old differs from the file at
// pos.
func (f *fileLines) mismatch(old []hunkLine, pos int) string {
	n := f.n()
	pos = max(pos, 0)
	for j, l := range old {
		i := pos + j
		if i >= n {
			return fmt.Sprintf("line %d expected %s but the file has only %d lines", i+1, quote(l.text), n)
		}
		if got := string(f.key(i)); got != l.text {
			return fmt.Sprintf("line %d expected %s found %s", i+1, quote(l.text), quote(got))
		}
		if l.noEOL && (i != n-1 || f.hasTerm(i)) {
			return fmt.Sprintf("line %d %s is not the file's last line without a newline, as the \"\\ No newline at end of file\" marker says",
				i+1, quote(l.text))
		}
	}
	return fmt.Sprintf("its lines match at line %d but it would overlap the previous hunk", pos+1)
}

// lineWriter assembles the patched content. A line written without a
// terminator that is followed by another line gets one, so that an
// unterminated last line that stopped being last cannot merge into the
// next.
type lineWriter struct {
	buf  bytes.Buffer
	eol  string
	open bool
}

func (w *lineWriter) add(b []byte) {
	w.sep()
	w.buf.Write(b)
	w.open = len(b) == 0 || b[len(b)-1] != '\n'
}

func (w *lineWriter) addText(text string, noEOL bool) {
	w.sep()
	w.buf.WriteString(text)
	if noEOL && text != "" {
		w.open = true
		return
	}
	w.buf.WriteString(w.eol)
	w.open = false
}

func (w *lineWriter) sep() {
	if w.open {
		w.buf.WriteString(w.eol)
	}
}
