package wire

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAppendString checks AppendString against Marshal on strings of
// every byte, runes JSON escapes, and random bytes (mostly invalid UTF-8),
// and that jsonLen counts what it writes.
func TestAppendString(t *testing.T) {
	var every strings.Builder
	for c := range 256 {
		every.WriteByte(byte(c))
	}
	cases := []string{"", "plain", `"quoted" \back\slash`, "<a href='x'>&amp;</a>", "é ü 日本 🎉", "\u2028\u2029", every.String()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendString([]byte("x"), s)
		if string(got[1:]) != string(want) {
			t.Fatalf("AppendString(%q) = %s, Marshal gives %s", s, got[1:], want)
		}
		if n := jsonLen(s) + 2; n != int64(len(want)) {
			t.Fatalf("jsonLen(%q)+2 = %d, Marshal writes %d", s, n, len(want))
		}
	}
}

func TestBashResultAppendJSON(t *testing.T) {
	for _, r := range []BashResult{
		{},
		{Stdout: "out\x00\n", Stderr: "err \"<x>\"", ExitCode: 3, DurationMS: 12, TimedOut: true,
			StdoutTruncatedBytes: 5, StderrTruncatedBytes: 6, SessionReset: true},
	} {
		want, _ := Marshal(r)
		got, err := r.AppendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("AppendJSON = %s, %v; Marshal gives %s", got, err, want)
		}
	}
}
