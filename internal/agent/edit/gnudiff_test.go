package edit

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gnuDiff runs the real diff -U<ctx> on a and b.
func gnuDiff(t testing.TB, dir string, a, b []byte, ctx int) string {
	t.Helper()
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("diff is not installed")
	}
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(pa, a, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("diff", fmt.Sprintf("-U%d", ctx), pa, pb).Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("diff: %v", err)
	}
	return string(out)
}

// randomFile makes a file from a small vocabulary so that lines repeat,
// which is what makes matching hunks at the right place hard.
func randomFile(r *rand.Rand, crlf bool) []byte {
	words := []string{"", "foo", "bar", "baz", "}", "{", "return nil", "\tx := 1", "// c", "if err != nil {"}
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var b strings.Builder
	n := r.IntN(40)
	for range n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteString(eol)
	}
	s := b.String()
	if n > 0 && r.IntN(4) == 0 {
		s = strings.TrimSuffix(s, eol)
	}
	return []byte(s)
}

// mutate applies a few random line edits and may toggle the final
// newline.
func mutate(r *rand.Rand, content []byte, crlf bool) []byte {
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	lines := strings.SplitAfter(string(content), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for range 1 + r.IntN(5) {
		pos := r.IntN(len(lines) + 1)
		switch r.IntN(3) {
		case 0:
			lines = append(lines[:pos], append([]string{fmt.Sprintf("new %d%s", r.IntN(100), eol)}, lines[pos:]...)...)
		case 1:
			if pos < len(lines) {
				lines = append(lines[:pos], lines[pos+1:]...)
			}
		case 2:
			if pos < len(lines) {
				lines[pos] = fmt.Sprintf("changed %d%s", r.IntN(100), eol)
			}
		}
	}
	out := strings.Join(lines, "")
	if r.IntN(5) == 0 {
		if strings.HasSuffix(out, "\n") {
			out = strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\r")
		} else if out != "" {
			out += eol
		}
	}
	return []byte(out)
}

func TestGNUDiffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	applied := 0
	for i := range 300 {
		crlf := i%5 == 0
		a := randomFile(r, crlf)
		b := mutate(r, a, crlf)
		ctx := []int{3, 0, 1, 5}[i%4]
		patch := gnuDiff(t, dir, a, b, ctx)
		if patch == "" {
			continue
		}
		got, err := ApplyUnifiedDiff(a, patch)
		if err != nil {
			t.Fatalf("case %d: %v\na=%q\nb=%q\npatch:\n%s", i, err, a, b, patch)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("case %d: got %q, want %q\npatch:\n%s", i, got, b, patch)
		}
		// The test oracle of the fuzz target must agree with GNU diff on
		// what a correct patch is.
		own := unifiedDiff(a, b, ctx)
		got, err = ApplyUnifiedDiff(a, own)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("case %d: own diff: err %v, got %q, want %q\npatch:\n%s", i, err, got, b, own)
		}
		applied++
	}
	if applied < 200 {
		t.Fatalf("only %d of 300 cases produced a diff", applied)
	}
}

// A diff made against a file must still apply after lines were added above
// and between its hunks, at the offsets it reports.
func TestGNUDiffAppliesAtOffset(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for i := range 50 {
		var lines []string
		for j := range 60 {
			lines = append(lines, fmt.Sprintf("line %d %d\n", j, r.IntN(1000)))
		}
		a := []byte(strings.Join(lines, ""))
		b := bytes.Clone(a)
		b = bytes.Replace(b, []byte(lines[10]), []byte("changed ten\n"), 1)
		b = bytes.Replace(b, []byte(lines[45]), []byte("changed 45\nextra\n"), 1)
		patch := gnuDiff(t, dir, a, b, 3)

		shift := 1 + r.IntN(8)
		prefix := strings.Repeat("prepended\n", shift)
		middle := "inserted between\n"
		shifted := prefix + strings.Join(lines[:30], "") + middle + strings.Join(lines[30:], "")
		p, err := ApplyPatch([]byte(shifted), patch)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		bl := strings.SplitAfter(string(b), "\n")
		// b has one more line than a after line 45, none before 30.
		want := prefix + strings.Join(bl[:30], "") + middle + strings.Join(bl[30:], "")
		if string(p.Content) != want {
			t.Fatalf("case %d: got %q, want %q", i, p.Content, want)
		}
		if p.Hunks[0].Offset != shift || p.Hunks[1].Offset != shift+1 {
			t.Fatalf("case %d: offsets %d, %d, want %d, %d", i, p.Hunks[0].Offset, p.Hunks[1].Offset, shift, shift+1)
		}
	}
}
