package edit

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchFile is a 20,000-line file and a patch changing 20 places in it,
// the last hunk stated 5 lines off.
func benchFile() ([]byte, string) {
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "line %d of the file with some text\n", i)
	}
	var p strings.Builder
	p.WriteString("--- a/f\n+++ b/f\n")
	for h := range 20 {
		at := h*1000 + 500
		stated := at
		if h == 19 {
			stated += 5
		}
		fmt.Fprintf(&p, "@@ -%d,3 +%d,3 @@\n line %d of the file with some text\n-line %d of the file with some text\n+changed %d\n line %d of the file with some text\n",
			stated+1, stated+1, at, at+1, at+1, at+2)
	}
	return []byte(b.String()), p.String()
}

// BenchmarkCopyBaseline is the floor: copying the content once.
func BenchmarkCopyBaseline(b *testing.B) {
	content, _ := benchFile()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		_ = bytes.Clone(content)
	}
}

func BenchmarkApplyUnifiedDiff(b *testing.B) {
	content, patch := benchFile()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := ApplyUnifiedDiff(content, patch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEditLines(b *testing.B) {
	content, _ := benchFile()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := EditLines(content, 10000, 10010, "new\nlines\n"); err != nil {
			b.Fatal(err)
		}
	}
}
