package console

import "testing"

// An event's data cannot end the event or add a field, whatever line
// endings a sandbox put in it: every CR, LF or CRLF starts a data line.
func TestEventFraming(t *testing.T) {
	got := string(event("live", []byte("a\rb\r\nc\n\nevent: gone\r\rdata: x")))
	want := "event: live\ndata: a\ndata: b\ndata: c\ndata: \ndata: event: gone\ndata: \ndata: data: x\n\n"
	if got != want {
		t.Fatalf("framed as\n%q\nwant\n%q", got, want)
	}
	if got := string(event("signedout", nil)); got != "event: signedout\ndata: \n\n" {
		t.Fatalf("empty event: %q", got)
	}
}
