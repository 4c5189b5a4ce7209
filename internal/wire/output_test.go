package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestFitOutput: text within its limit passes unchanged, whatever JSON
// makes of quotes and newlines; output JSON spells in six bytes a byte is
// trimmed to twice its limit in JSON text, head and tail kept around one
// marker counting everything omitted, the agent's own marker included.
func TestFitOutput(t *testing.T) {
	text := strings.Repeat("say \"hi\"\n\tok\n", 100) // about 1.4 bytes of JSON a byte
	res := BashResult{Stdout: text}
	FitOutput(&res, int64(len(text)))
	if res.Stdout != text || res.StdoutTruncatedBytes != 0 {
		t.Errorf("text within its limit changed: %d bytes, %d omitted", len(res.Stdout), res.StdoutTruncatedBytes)
	}

	// As the agent keeps 1000 NUL bytes of 5000 with a limit of 1000.
	const limit = 1000
	head, tail := strings.Repeat("\x00", 500), strings.Repeat("\x01", 500)
	res = BashResult{Stdout: head + OmittedMarker(4000) + tail, StdoutTruncatedBytes: 4000, Stderr: "fine"}
	FitOutput(&res, limit)
	marker := OmittedMarker(res.StdoutTruncatedBytes)
	h, tl, ok := strings.Cut(res.Stdout, marker)
	if !ok || strings.Count(res.Stdout, "omitted") != 1 {
		t.Fatalf("stdout %q: want one marker naming %d", res.Stdout, res.StdoutTruncatedBytes)
	}
	if strings.Trim(h, "\x00") != "" || strings.Trim(tl, "\x01") != "" || h == "" || tl == "" {
		t.Errorf("head %q tail %q: want the start and the end", h, tl)
	}
	if got := int64(len(h)+len(tl)) + res.StdoutTruncatedBytes; got != 5000 {
		t.Errorf("kept and omitted add up to %d, want the 5000 written", got)
	}
	if b, _ := json.Marshal(h + tl); int64(len(b)) > OutputJSONFit*limit+2 {
		t.Errorf("kept %d bytes of JSON, want at most %d", len(b), OutputJSONFit*limit)
	}
	if res.Stderr != "fine" || res.StderrTruncatedBytes != 0 {
		t.Errorf("stderr changed: %+v", res)
	}

	// Without a marker (nothing omitted yet), and with invalid UTF-8.
	res = BashResult{Stdout: strings.Repeat("\xff", 3000)}
	FitOutput(&res, limit)
	if b, _ := json.Marshal(res.Stdout); res.StdoutTruncatedBytes == 0 || int64(len(b)) > OutputJSONFit*limit+64 {
		t.Errorf("invalid UTF-8: %d bytes of JSON, %d omitted", len(b), res.StdoutTruncatedBytes)
	}
	// No limit: nothing to fit to.
	res = BashResult{Stdout: strings.Repeat("\x00", 3000)}
	FitOutput(&res, -1)
	if len(res.Stdout) != 3000 {
		t.Errorf("no limit trimmed to %d", len(res.Stdout))
	}
}

// TestMarshal: no HTML escaping, no trailing newline.
func TestMarshal(t *testing.T) {
	b, err := Marshal(map[string]string{"a": "<b>&"})
	if err != nil || string(b) != `{"a":"<b>&"}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}

// TestFitOutputDecoded: invalid bytes come back from JSON as U+FFFD,
// three bytes each, so a stream of them is fitted to its limit as its
// receiver decodes it, and a receiver fitting it again changes nothing.
func TestFitOutputDecoded(t *testing.T) {
	const limit = 1000
	res := BashResult{Stdout: strings.Repeat("\xff", 900), Stderr: "fine"}
	FitOutput(&res, limit)
	if !res.Truncated || res.StdoutTruncatedBytes == 0 || res.StderrTruncatedBytes != 0 {
		t.Fatalf("900 invalid bytes with a limit of 1000: %+v", res)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got BashResult
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if kept := len(got.Stdout) - len(OmittedMarker(got.StdoutTruncatedBytes)); kept > limit {
		t.Errorf("decoded, stdout holds %d bytes besides its marker, want at most %d", kept, limit)
	}
	again := got
	FitOutput(&again, limit)
	if !reflect.DeepEqual(again, got) {
		t.Errorf("fitting a fitted result again changed it: %+v", again)
	}
	if kept := int64(len(res.Stdout) - len(OmittedMarker(res.StdoutTruncatedBytes))); kept+res.StdoutTruncatedBytes != 900 {
		t.Errorf("kept and omitted add up to %d, want 900", kept+res.StdoutTruncatedBytes)
	}
}
