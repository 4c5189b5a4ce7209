package edit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzMaxLines bounds the inputs the quadratic diff oracle works on.
const fuzzMaxLines = 200

func truncateLines(b []byte, n int) []byte {
	return b[:skipLines(b, 0, n)]
}

// FuzzApplyPatch feeds arbitrary content and patches to ApplyUnifiedDiff,
// which must not panic, and checks that a diff written from content to
// target (by the test's own diff writer) reproduces target exactly.
func FuzzApplyPatch(f *testing.F) {
	seeds := [][2]string{
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"a\nb", "a\nb\n"},
		{"a\nb\n", "a\nb"},
		{"", "new\nfile\n"},
		{"x\r\ny\r\n", "x\r\nz\r\ny\r\n"},
		{numbered(30), strings.Replace(strings.Replace(numbered(30), "l5\n", "", 1), "l25\n", "l25\nnew\n", 1)},
		{"}\n}\n}\n{\n", "}\n{\n}\n"},
	}
	dir := f.TempDir()
	_, lookErr := exec.LookPath("diff")
	for i, s := range seeds {
		var patch string
		if lookErr == nil {
			patch = realDiff(f, dir, []byte(s[0]), []byte(s[1]))
		} else {
			patch = unifiedDiff([]byte(s[0]), []byte(s[1]), 3)
		}
		f.Add([]byte(s[0]), patch, []byte(s[1]), uint8(i))
	}
	f.Add([]byte("a\n"), "@@ -1 +1 @@\n-a\n\\\n+b\n\\ x\n", []byte("b"), uint8(0))
	f.Add([]byte("a\r\nb"), "@@ -0,0 +1 @@\n+z\r\n", []byte(""), uint8(1))
	f.Fuzz(func(t *testing.T, content []byte, patch string, target []byte, ctx uint8) {
		// Arbitrary input: any answer but a panic is fine, and a failed
		// apply must not touch its input.
		orig := bytes.Clone(content)
		p, err := ApplyPatch(content, patch)
		if !bytes.Equal(content, orig) {
			t.Fatalf("ApplyPatch modified its input")
		}
		if err == nil && p.Lines != countLines(p.Content) {
			t.Fatalf("Lines = %d, content has %d", p.Lines, countLines(p.Content))
		}

		content = truncateLines(content, fuzzMaxLines)
		target = truncateLines(target, fuzzMaxLines)
		if bytes.Equal(content, target) {
			return
		}
		diff := unifiedDiff(content, target, int(ctx%6))
		got, err := ApplyUnifiedDiff(content, diff)
		if err != nil {
			t.Fatalf("own diff does not apply: %v\ncontent %q\ntarget %q\npatch:\n%s", err, content, target, diff)
		}
		if !bytes.Equal(got, target) {
			t.Fatalf("got %q, want %q\npatch:\n%s", got, target, diff)
		}
	})
}

// realDiff is gnuDiff for seeding, where no ctx is varied.
func realDiff(f *testing.F, dir string, a, b []byte) string {
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(pa, a, 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(pb, b, 0o644); err != nil {
		f.Fatal(err)
	}
	out, _ := exec.Command("diff", "-u", pa, pb).Output()
	return string(out)
}

// FuzzEditLines checks EditLines on arbitrary input: no panic; an error
// exactly when the range is invalid; on success the lines before and after
// the range are unchanged, new_content's lines sit at start_line, and the
// file keeps ending, or not ending, with a newline.
func FuzzEditLines(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), 2, 2, "x\ny\n")
	f.Add([]byte("a\r\nb\r\n"), 3, 2, "c")
	f.Add([]byte("a\nb"), 2, 2, "")
	f.Add([]byte("a\nb"), 3, 2, "\n")
	f.Add([]byte(""), 1, 0, "x\r\n\r\n")
	f.Add([]byte("\n\n"), 0, -1, "x")
	f.Fuzz(func(t *testing.T, content []byte, start, end int, newContent string) {
		orig := bytes.Clone(content)
		out, err := EditLines(content, start, end, newContent)
		if !bytes.Equal(content, orig) {
			t.Fatalf("EditLines modified its input")
		}
		before := textLines(content)
		total := len(before)
		valid := start >= 1 && start <= total+1 && end >= start-1 && end <= total
		if err != nil {
			if valid {
				t.Fatalf("valid range %d..%d of %d lines failed: %v", start, end, total, err)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid range %d..%d of %d lines succeeded", start, end, total)
		}
		var raw, ins []string
		if newContent != "" {
			raw = strings.Split(strings.TrimSuffix(newContent, "\n"), "\n")
		}
		for _, l := range raw {
			ins = append(ins, strings.TrimRight(l, "\r"))
		}
		after := textLines(out)
		finalNL := len(content) == 0 || content[len(content)-1] == '\n'
		wantLen := start - 1 + len(ins) + total - end
		if len(after) != wantLen {
			t.Fatalf("got %d lines, want %d: %q", len(after), wantLen, out)
		}
		for i := 0; i < start-1; i++ {
			if after[i] != before[i] {
				t.Fatalf("line %d changed from %q to %q", i+1, before[i], after[i])
			}
		}
		for i, l := range ins {
			if after[start-1+i] != l {
				t.Fatalf("line %d is %q, want new line %q", start+i, after[start-1+i], l)
			}
		}
		for i := 0; i < total-end; i++ {
			if a, b := after[len(after)-1-i], before[total-1-i]; a != b {
				t.Fatalf("line %d from the end changed from %q to %q", i+1, b, a)
			}
		}
		// An empty last line keeps its newline, or it would vanish.
		emptyLast := len(after) > 0 && strings.TrimRight(string(rawLines(out)[len(after)-1]), "\r\n") == ""
		if len(out) > 0 && !emptyLast && (out[len(out)-1] == '\n') != finalNL {
			t.Fatalf("final newline changed: %q -> %q", content, out)
		}
	})
}

// textLines splits content into lines without terminators, "\r" treated
// as part of a CRLF terminator.
func textLines(b []byte) []string {
	var out []string
	for _, l := range rawLines(b) {
		out = append(out, strings.TrimRight(strings.TrimSuffix(string(l), "\n"), "\r"))
	}
	return out
}
