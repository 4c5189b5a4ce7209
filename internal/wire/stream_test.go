package wire

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// streamAll writes s to an OutputStream in chunks of n bytes and returns
// what a client would have received, joined, and the omitted count.
func streamAll(s string, limit int64, n int) (string, int64) {
	o := NewOutputStream(limit)
	var got strings.Builder
	for i := 0; i < len(s); i += n {
		got.Write(o.Write([]byte(s[i:min(i+n, len(s))])))
	}
	rest, omitted := o.Close()
	return got.String() + rest, omitted
}

func TestOutputStreamKeepsHeadAndTail(t *testing.T) {
	for _, n := range []int{1, 3, 7, 1000} {
		if got, om := streamAll("0123456789", 4, n); got != "01"+OmittedMarker(6)+"89" || om != 6 {
			t.Errorf("chunks of %d: got %q, %d omitted", n, got, om)
		}
		if got, om := streamAll("0123", 4, n); got != "0123" || om != 0 {
			t.Errorf("chunks of %d: output at the limit: got %q, %d omitted", n, got, om)
		}
		if got, om := streamAll("héllo wörld", -1, n); got != "héllo wörld" || om != 0 {
			t.Errorf("chunks of %d: no limit: got %q", n, got)
		}
		if got, om := streamAll("abc", 0, n); got != OmittedMarker(3) || om != 3 {
			t.Errorf("chunks of %d: zero limit: got %q", n, got)
		}
	}
}

// The pieces joined are what FitOutput keeps of the same output whole.
func TestOutputStreamMatchesFitOutput(t *testing.T) {
	text := strings.Repeat("line é 12345\n", 5000) + "\x00\x01\xff" + strings.Repeat("tail ✓\n", 3000)
	for _, limit := range []int64{100, 4096, 1 << 20} {
		for _, n := range []int{1, 4096, 65536} {
			got, om := streamAll(text, limit, n)
			if int64(len(text)) <= limit && (got != text || om != 0) {
				t.Fatalf("limit %d: whole output changed", limit)
			}
			b, _ := json.Marshal(got)
			if int64(len(b)) > OutputJSONFit*limit+64 {
				t.Fatalf("limit %d chunks %d: %d bytes of JSON", limit, n, len(b))
			}
			head, tail, ok := strings.Cut(got, OmittedMarker(om))
			if int64(len(text)) > limit && (!ok || !strings.HasPrefix(text, head) || !strings.HasSuffix(text, tail)) {
				t.Fatalf("limit %d chunks %d: not head, marker and tail: %q", limit, n, got[:min(len(got), 80)])
			}
			if int64(len(head)+len(tail))+om != int64(len(text)) {
				t.Fatalf("limit %d chunks %d: kept %d + omitted %d != %d", limit, n, len(head)+len(tail), om, len(text))
			}
		}
	}
}

// A hostile writer cannot grow the reader or pass off a broken stream.
func TestReadEventsBounds(t *testing.T) {
	noop := func(ExecEvent) error { return nil }
	long := `{"stream":"stdout","data":"` + strings.Repeat("x", 200) + `"}` + "\n"
	if _, err := ReadEvents(strings.NewReader(long), 100, noop); !errors.Is(err, ErrEventTooLong) {
		t.Errorf("long line: %v", err)
	}
	if _, err := ReadEvents(strings.NewReader(`{"stream":"stdin","data":"x"}`+"\n"), 100, noop); err == nil || !strings.Contains(err.Error(), "unknown stream") {
		t.Errorf("unknown stream: %v", err)
	}
	if _, err := ReadEvents(strings.NewReader(`{"stream":"stdout","data":"x"}`+"\n"), 100, noop); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("no final event: %v", err)
	}
	if _, err := ReadEvents(strings.NewReader("{not json\n"), 100, noop); err == nil {
		t.Error("malformed event passed")
	}
	var got []string
	end, err := ReadEvents(strings.NewReader(`{"stream":"stdout","data":"a"}`+"\n"+`{"stream":"stderr","data":"b"}`+"\n"+`{"exit_code":2,"timed_out":true}`),
		100, func(ev ExecEvent) error { got = append(got, ev.Stream+":"+ev.Data); return nil })
	if err != nil || end.ExitCode == nil || *end.ExitCode != 2 || !end.TimedOut || strings.Join(got, ",") != "stdout:a,stderr:b" {
		t.Errorf("good stream: %v %+v %v", err, end, got)
	}
}
