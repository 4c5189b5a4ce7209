package edit

import (
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// numbered returns lines "l1".."ln", each ending in "\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("l")
		b.WriteString(itoa(i))
		b.WriteString("\n")
	}
	return b.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestApplyUnifiedDiff(t *testing.T) {
	tests := []struct {
		name        string
		content     string
		patch       string
		want        string
		wantOffsets []int
	}{
		{
			name:    "single hunk with headers",
			content: "a\nb\nc\n",
			patch:   "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			want:    "a\nB\nc\n", wantOffsets: []int{0},
		},
		{
			name:    "git preamble and section heading",
			content: "a\nb\nc\n",
			patch:   "diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@ func main() {\n a\n-b\n+B\n c\n",
			want:    "a\nB\nc\n",
		},
		{
			name:    "no file headers",
			content: "a\nb\nc\n",
			patch:   "@@ -2 +2 @@\n-b\n+B\n",
			want:    "a\nB\nc\n",
		},
		{
			name:    "multi hunk",
			content: numbered(20),
			patch: "@@ -2,3 +2,3 @@\n l2\n-l3\n+three\n l4\n" +
				"@@ -15,3 +15,4 @@\n l15\n+after15\n l16\n l17\n",
			want:        strings.Replace(strings.Replace(numbered(20), "l3\n", "three\n", 1), "l15\n", "l15\nafter15\n", 1),
			wantOffsets: []int{0, 0},
		},
		{
			name:    "offset search forward",
			content: "x\nx\nx\n" + numbered(10),
			patch:   "@@ -4,3 +4,3 @@\n l4\n-l5\n+five\n l6\n",
			want:    "x\nx\nx\n" + strings.Replace(numbered(10), "l5\n", "five\n", 1), wantOffsets: []int{3},
		},
		{
			name:    "offset search backward and carried to the next hunk",
			content: strings.Replace(numbered(30), "l1\nl2\nl3\n", "", 1),
			patch: "@@ -9,3 +9,3 @@\n l9\n-l10\n+ten\n l11\n" +
				"@@ -20,3 +20,3 @@\n l20\n-l21\n+twentyone\n l22\n",
			want:        strings.Replace(strings.Replace(strings.Replace(numbered(30), "l1\nl2\nl3\n", "", 1), "l10\n", "ten\n", 1), "l21\n", "twentyone\n", 1),
			wantOffsets: []int{-3, -3},
		},
		{
			name:    "adding at the end",
			content: "a\nb\n",
			patch:   "@@ -2,0 +3,2 @@\n+c\n+d\n",
			want:    "a\nb\nc\nd\n",
		},
		{
			name:    "adding at the end with context",
			content: "a\nb\n",
			patch:   "@@ -1,2 +1,3 @@\n a\n b\n+c\n",
			want:    "a\nb\nc\n",
		},
		{
			name:    "new file into empty content",
			content: "",
			patch:   "--- /dev/null\n+++ b/new\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
			want:    "hello\nworld\n",
		},
		{
			name:    "removing the last newline",
			content: "a\nb\n",
			patch:   "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n",
			want:    "a\nb",
		},
		{
			name:    "adding the last newline",
			content: "a\nb",
			patch:   "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
			want:    "a\nb\n",
		},
		{
			name:    "context without newline on both sides",
			content: "a\nb\nc",
			patch:   "@@ -1,3 +1,3 @@\n-a\n+A\n b\n c\n\\ No newline at end of file\n",
			want:    "A\nb\nc",
		},
		{
			name:    "appending after a last line without newline",
			content: "a\nb",
			patch:   "@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n+b\n+c\n\\ No newline at end of file\n",
			want:    "a\nb\nc",
		},
		{
			name:    "blank context line without its space",
			content: "a\n\nb\n",
			patch:   "@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n",
			want:    "a\n\nB\n",
		},
		{
			name:    "crlf file with crlf patch is exact",
			content: "a\r\nb\r\nc\r\n",
			patch:   "--- a/f\r\n+++ b/f\r\n@@ -1,3 +1,3 @@\r\n a\r\n-b\r\n+B\r\n c\r\n",
			want:    "a\r\nB\r\nc\r\n",
		},
		{
			name:    "crlf file with lf patch keeps crlf",
			content: "a\r\nb\r\nc\r\n",
			patch:   "@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n",
			want:    "a\r\nB\r\nB2\r\nc\r\n",
		},
		{
			name:    "lf file with crlf patch keeps lf",
			content: "a\nb\nc\n",
			patch:   "@@ -1,3 +1,3 @@\r\n a\r\n-b\r\n+B\r\n c\r\n",
			want:    "a\nB\nc\n",
		},
		{
			name:    "mixed endings with lf patch touching lf lines is exact",
			content: "a\r\nb\nc\n",
			patch:   "@@ -2,2 +2,2 @@\n b\n-c\n+C\n",
			want:    "a\r\nb\nC\n",
		},
		{
			name:    "line ending in a lone cr",
			content: "x\n\r",
			patch:   "@@ -2 +2 @@\n-\r\n\\ No newline at end of file\n+y\r\n\\ No newline at end of file\n",
			want:    "x\ny\r",
		},
		{
			name:    "blank context line in crlf patch",
			content: "a\r\n\r\nb\r\n",
			patch:   "@@ -1,3 +1,3 @@\r\n a\r\n\r\n-b\r\n+B\r\n",
			want:    "a\r\n\r\nB\r\n",
		},
		{
			name:    "delete everything",
			content: "a\nb\n",
			patch:   "@@ -1,2 +0,0 @@\n-a\n-b\n",
			want:    "",
		},
		{
			name:    "line that looks like a header inside a hunk",
			content: "-- x\n++ y\nz\n",
			patch:   "--- a/f\n+++ b/f\n@@ -1,3 +1 @@\n--- x\n-++ y\n+@@ z\n-z\n",
			want:    "@@ z\n",
		},
		{
			name:    "format-patch signature",
			content: "a\n",
			patch:   "@@ -1 +1 @@\n-a\n+b\n-- \n2.43.0\n",
			want:    "b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ApplyPatch([]byte(tt.content), tt.patch)
			if err != nil {
				t.Fatalf("ApplyPatch: %v", err)
			}
			if string(p.Content) != tt.want {
				t.Fatalf("got %q, want %q", p.Content, tt.want)
			}
			if p.Lines != countLines([]byte(tt.want)) {
				t.Errorf("Lines = %d, want %d", p.Lines, countLines([]byte(tt.want)))
			}
			if tt.wantOffsets != nil {
				var got []int
				for _, h := range p.Hunks {
					got = append(got, h.Offset)
				}
				if !equalInts(got, tt.wantOffsets) {
					t.Errorf("offsets = %v, want %v", got, tt.wantOffsets)
				}
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestApplyUnifiedDiffErrors(t *testing.T) {
	content := numbered(20)
	tests := []struct {
		name      string
		content   string
		patch     string
		code      string
		wantParts []string
	}{
		{
			name:  "context mismatch names hunk and line",
			patch: "@@ -2,3 +2,3 @@\n l2\n-l3\n+x\n l4\n@@ -12,3 +12,3 @@\n l12\n-foo\n+bar\n l14\n",
			code:  wire.CodeConflict,
			wantParts: []string{"hunk 2 (@@ -12,3 +12,3 @@)", `line 13 expected "foo" found "l13"`,
				"its 3 context and removed lines match nowhere else in lines 5-20"},
		},
		{
			name:      "hunk past the end of the file",
			patch:     "@@ -19,3 +19,3 @@\n l19\n l20\n-l21\n+x\n",
			code:      wire.CodeConflict,
			wantParts: []string{"hunk 1 (@@ -19,3 +19,3 @@)", `line 21 expected "l21" but the file has only 20 lines`},
		},
		{
			name:      "no newline marker must hold",
			patch:     "@@ -20 +20 @@\n-l20\n\\ No newline at end of file\n+x\n",
			code:      wire.CodeConflict,
			wantParts: []string{"hunk 1", "not the file's last line without a newline"},
		},
		{
			name:      "insertion past the end",
			patch:     "@@ -30,0 +31 @@\n+x\n",
			code:      wire.CodeConflict,
			wantParts: []string{"hunk 1 (@@ -30,0 +31 @@)", "inserts after line 30", "file has 20 lines"},
		},
		{
			name:      "malformed header",
			patch:     "--- a/f\n+++ b/f\n@@ -1,x +1,2 @@\n a\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 3", "malformed hunk header", `"@@ -1,x +1,2 @@"`},
		},
		{
			name:      "header without closing",
			patch:     "@@ -1,2 +1,2\n l1\n l2\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 1", "closing"},
		},
		{
			name:      "counts too big",
			patch:     "@@ -1,3 +1,3 @@\n l1\n-l2\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"hunk 1 (@@ -1,3 +1,3 @@) is cut short", "1 old and 1 new"},
		},
		{
			name:      "counts too small",
			patch:     "@@ -1,2 +1,2 @@\n l1\n-l2\n+x\n l3\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 5", "hunk 1", `" l3"`},
		},
		{
			name:      "garbage in hunk body",
			patch:     "@@ -1,3 +1,3 @@\n l1\nl2\n l3\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 3", "hunk 1", `"l2"`},
		},
		{
			name:      "two files",
			patch:     "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-l1\n+x\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 6", "one file"},
		},
		{
			name:      "two git diffs",
			patch:     "diff --git a/f b/f\nnew file mode 100644\ndiff --git a/g b/g\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 3", "one file"},
		},
		{
			name:      "no hunks",
			patch:     "--- a/f\n+++ b/f\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"no hunks"},
		},
		{
			name:      "header not followed by hunk",
			patch:     "--- a/f\n+++ b/f\nhello\n@@ -1 +1 @@\n-l1\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 3", "expected a hunk header"},
		},
		{
			name:      "lonely minus header",
			patch:     "--- a/f\n@@ -1 +1 @@\n-l1\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 1", `"+++ "`},
		},
		{
			name:      "marker with no line",
			patch:     "@@ -1 +1 @@\n\\ No newline at end of file\n-l1\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"patch line 2", "follows no line"},
		},
		{
			name:      "zero start with lines",
			patch:     "@@ -0,1 +1 @@\n-l1\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"starts at line 0"},
		},
		{
			name:      "huge number",
			patch:     "@@ -99999999999,1 +1 @@\n-l1\n+x\n",
			code:      wire.CodeBadRequest,
			wantParts: []string{"malformed hunk header"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := content
			if tt.content != "" {
				in = tt.content
			}
			orig := []byte(in)
			got, err := ApplyUnifiedDiff(orig, tt.patch)
			if err == nil {
				t.Fatalf("ApplyUnifiedDiff succeeded with %q, want error", got)
			}
			if string(orig) != in {
				t.Fatalf("input content was modified")
			}
			d := wire.DetailOf(err)
			if d.Code != tt.code {
				t.Errorf("code = %s, want %s (%s)", d.Code, tt.code, d.Message)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(d.Message, p) {
					t.Errorf("message %q lacks %q", d.Message, p)
				}
			}
		})
	}
}

// A hunk may not match inside a region an earlier hunk already changed,
// even when its lines appear there.
func TestApplyUnifiedDiffNoOverlap(t *testing.T) {
	content := "a\nb\nc\n"
	patch := "@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -1,2 +1,2 @@\n a\n-b\n+X\n"
	_, err := ApplyUnifiedDiff([]byte(content), patch)
	if d := wire.DetailOf(err); err == nil || d.Code != wire.CodeConflict || !strings.Contains(d.Message, "hunk 2") {
		t.Fatalf("err = %v, want conflict naming hunk 2", err)
	}
}

// The nearest match wins when the context occurs more than once.
func TestApplyUnifiedDiffNearestMatch(t *testing.T) {
	content := "k\nv\n" + strings.Repeat("pad\n", 10) + "k\nv\n" + strings.Repeat("pad\n", 3)
	// Stated at line 10, the copy at line 13 is nearer than the one at 1.
	patch := "@@ -10,2 +10,2 @@\n k\n-v\n+V\n"
	p, err := ApplyPatch([]byte(content), patch)
	if err != nil {
		t.Fatal(err)
	}
	want := "k\nv\n" + strings.Repeat("pad\n", 10) + "k\nV\n" + strings.Repeat("pad\n", 3)
	if string(p.Content) != want || p.Hunks[0].Offset != 3 || p.Hunks[0].Line != 13 {
		t.Fatalf("got %q offset %d line %d", p.Content, p.Hunks[0].Offset, p.Hunks[0].Line)
	}
}
