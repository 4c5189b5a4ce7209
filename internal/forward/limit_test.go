package forward

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// unknownLength is an answer of body without a Content-Length.
func unknownLength(body io.Reader) *http.Response {
	return &http.Response{Body: io.NopCloser(body), ContentLength: -1}
}

func TestLimitBody(t *testing.T) {
	f := newForwarder(t, nil)
	ctx := context.Background()
	read := func(body string, limit int64) (string, error) {
		b, err := f.ReadBody(ctx, unknownLength(strings.NewReader(body)), limit, "s1")
		return string(b), err
	}
	if got, err := read("12345", 5); err != nil || got != "12345" {
		t.Errorf("exactly the limit: %q %v", got, err)
	}
	if got, err := read("", 0); err != nil || got != "" {
		t.Errorf("empty at limit 0: %q %v", got, err)
	}
	got, err := io.ReadAll(f.limitBody(ctx, io.NopCloser(strings.NewReader("123456")), 5, -1, "s1", nil))
	if !errors.Is(err, ErrAnswerTooLarge) || string(got) != "12345" {
		t.Errorf("one byte over: %q %v, want the limit's bytes and ErrAnswerTooLarge", got, err)
	}
	d := wire.DetailOf(err)
	if d.Code != wire.CodeBadGateway || !strings.Contains(d.Message, "s1") || !strings.Contains(d.Message, "5 bytes") {
		t.Errorf("error %+v: want bad_gateway naming the server and the limit", d)
	}
	if _, err := read("123456", 5); !errors.Is(err, ErrAnswerTooLarge) {
		t.Errorf("one byte over through ReadBody: %v", err)
	}
	// An endless body is read to the limit and no further.
	src := &countingReader{r: &pattern{}}
	_, err = f.ReadBody(ctx, unknownLength(src), 3<<20, "s1")
	if !errors.Is(err, ErrAnswerTooLarge) || src.n > 3<<20+1 {
		t.Errorf("endless body: read %d bytes (%v), want at most limit+1 and ErrAnswerTooLarge", src.n, err)
	}
	// Blocks of an answer of unknown length come back whole and in order.
	want := strings.Repeat("0123456789", 300_000)
	if got, err := read(want, 4<<20); err != nil || got != want {
		t.Errorf("3 MB in blocks: %d bytes, %v", len(got), err)
	}
	// An answer announcing more than the limit is refused unread; one
	// announcing its length is read to it.
	src = &countingReader{r: &pattern{}}
	_, err = f.ReadBody(ctx, &http.Response{Body: io.NopCloser(src), ContentLength: 400 << 20}, 1<<20, "s1")
	if !errors.Is(err, ErrAnswerTooLarge) || src.n != 0 {
		t.Errorf("400 MB announced: read %d bytes (%v), want none and ErrAnswerTooLarge", src.n, err)
	}
	b, err := f.ReadBody(ctx, &http.Response{Body: io.NopCloser(strings.NewReader("abc")), ContentLength: 3}, 3, "s1")
	if err != nil || string(b) != "abc" {
		t.Errorf("announced length: %q %v", b, err)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestBudget: answers beyond their free bytes share one budget. One that
// does not fit fails as unavailable (Wait 0 here) while another holds it,
// and gets it once that one is closed; small answers need none.
func TestBudget(t *testing.T) {
	f := newForwarder(t, nil)
	f.Budget = NewBudget(2 << 20)
	f.Budget.Wait = 0
	ctx := context.Background()
	big := func() *http.Response { return unknownLength(io.LimitReader(&pattern{}, 1<<20)) }

	first := big()
	if _, err := f.ReadBody(ctx, first, 2<<20, "s1"); err != nil {
		t.Fatalf("first answer: %v", err)
	}
	_, err := f.ReadBody(ctx, big(), 2<<20, "s2")
	if d := wire.DetailOf(err); d.Code != wire.CodeUnavailable || !strings.Contains(d.Message, "s2") {
		t.Fatalf("second answer while the first holds the budget: %v, want unavailable naming s2", err)
	}
	if b, err := f.ReadBody(ctx, unknownLength(strings.NewReader("small")), 2<<20, "s3"); err != nil || string(b) != "small" {
		t.Fatalf("a small answer needs no budget: %q %v", b, err)
	}
	first.Body.Close()
	second := big()
	if _, err := f.ReadBody(ctx, second, 2<<20, "s2"); err != nil {
		t.Fatalf("second answer after the first was closed: %v", err)
	}
	second.Body.Close()
	// An announced length reserves only what it announced.
	for _, id := range []string{"a", "b", "c"} {
		resp := &http.Response{Body: io.NopCloser(io.LimitReader(&pattern{}, 512<<10)), ContentLength: 512 << 10}
		if _, err := f.ReadBody(ctx, resp, 2<<20, id); err != nil {
			t.Fatalf("announced 512 KiB answer %s: %v", id, err)
		}
		defer resp.Body.Close()
	}
}

// TestBudgetHold: a sandbox that trickles an answer cannot keep the
// budget: past Hold, its answer fails and the reservation is given back.
func TestBudgetHold(t *testing.T) {
	stall := make(chan struct{})
	defer close(stall)
	ep := startBackend(t, "unix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 200<<10)))
		http.NewResponseController(w).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	f := newForwarder(t, nil)
	f.Budget = NewBudget(4 << 20)
	f.Budget.Hold = 10 * time.Millisecond
	ctx := context.Background()
	target := Target{ServerID: "slow", Endpoint: ep, Token: testToken}
	resp, err := f.Do(ctx, target, http.MethodGet, "x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadBody(ctx, resp, 4<<20, "slow")
	resp.Body.Close()
	if d := wire.DetailOf(err); d.Code != wire.CodeBadGateway || !strings.Contains(d.Message, "slow") || !strings.Contains(d.Message, "took more than") {
		t.Fatalf("trickled answer: %v, want bad_gateway saying it took too long", err)
	}
	// The whole budget is free again.
	f.Budget.Wait = 0
	if _, err := f.Budget.reserve(ctx, 4<<20, "next"); err != nil {
		t.Fatalf("the trickler's reservation was not given back: %v", err)
	}
}
