package opruns_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/agent/opruns"
	"github.com/berth-mcp/berth/internal/wire"
)

const deadline = 30 * time.Second

func answer(body string) func(context.Context) opruns.Answer {
	return func(context.Context) opruns.Answer { return opruns.Answer{Status: 200, Body: []byte(body)} }
}

// never is the command of a request that must get a kept answer.
func never(t *testing.T) func(context.Context) opruns.Answer {
	return func(context.Context) opruns.Answer {
		t.Error("a request for a kept answer ran its command again")
		return opruns.Answer{}
	}
}

// blocked is a run that lasts until release is closed or its context
// ends.
func blocked(release <-chan struct{}) func(context.Context) opruns.Answer {
	return func(ctx context.Context) opruns.Answer {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return opruns.Answer{Status: 200, Body: []byte("blocked")}
	}
}

func do(t *testing.T, tab *opruns.Table, id string, age time.Duration, fn func(context.Context) opruns.Answer) (opruns.Answer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return tab.Do(ctx, id, age, fn)
}

// upAnHour is a table's options for an agent that started an hour ago.
func upAnHour(o opruns.Options) opruns.Options {
	o.Started = time.Now().Add(-time.Hour)
	return o
}

// since returns the age a takeover states for an operation recorded
// when since was called: the time since, and a second's margin, as berth
// adds one (an agent that received the operation must never seem to
// have received it before it was recorded).
func since() func() time.Duration {
	t0 := time.Now()
	return func() time.Duration { return time.Since(t0) + time.Second }
}

func wantCode(t *testing.T, err error, code string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	d := wire.DetailOf(err)
	if d.Code != code {
		t.Fatalf("%s (%s), want %s", d.Code, d.Message, code)
	}
	for _, w := range words {
		if !strings.Contains(d.Message, w) {
			t.Fatalf("%q does not say %q", d.Message, w)
		}
	}
}

// TestRunsAreBoundedInCount: a table full of running commands refuses
// another (unavailable) rather than grow; a kept answer makes room for a
// new run by going, oldest first, and a takeover of the operation whose
// answer went is told its outcome is unknown instead of running again.
func TestRunsAreBoundedInCount(t *testing.T) {
	tab := opruns.New(upAnHour(opruns.Options{MaxRuns: 2}))
	defer tab.Close()
	age := since()
	release := make(chan struct{})
	bg, cancel := context.WithCancel(context.Background())
	for _, id := range []string{"a", "b"} {
		go tab.Do(bg, id, 0, blocked(release))
	}
	for tab.Len() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	_, err := do(t, tab, "c", 0, answer("c"))
	wantCode(t, err, wire.CodeUnavailable, "2 commands")
	close(release)
	for _, id := range []string{"a", "b"} { // both ended and kept
		if ans, err := do(t, tab, id, age(), never(t)); err != nil || string(ans.Body) != "blocked" {
			t.Fatalf("%s: %q %v", id, ans.Body, err)
		}
	}
	if ans, err := do(t, tab, "c", 0, answer("c")); err != nil || string(ans.Body) != "c" {
		t.Fatalf("c once a kept answer could go: %q %v", ans.Body, err)
	}
	if tab.Len() != 2 {
		t.Fatalf("%d runs held, want at most 2", tab.Len())
	}
	gone := "a"
	if _, err := do(t, tab, "a", age(), never(t)); err == nil {
		gone = "b"
	}
	_, err = do(t, tab, gone, age(), answer("again"))
	wantCode(t, err, wire.CodeConflict, "let go of outcomes", "unknown")
}

// TestKeptAnswersAreBoundedInBytes: answers over the byte bound go,
// oldest first; one larger than the bound by itself reaches the request
// waiting for it but is not kept.
func TestKeptAnswersAreBoundedInBytes(t *testing.T) {
	tab := opruns.New(upAnHour(opruns.Options{MaxBytes: 10}))
	defer tab.Close()
	age := since()
	for _, id := range []string{"one", "two"} {
		if _, err := do(t, tab, id, 0, answer("123456")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := do(t, tab, "one", age(), answer("again"))
	wantCode(t, err, wire.CodeConflict, "let go")
	if ans, err := do(t, tab, "two", age(), never(t)); err != nil || string(ans.Body) != "123456" {
		t.Fatalf("the newer answer: %q %v", ans.Body, err)
	}
	big := strings.Repeat("x", 11)
	if ans, err := do(t, tab, "big", 0, answer(big)); err != nil || string(ans.Body) != big {
		t.Fatalf("the live request for an oversized answer: %q %v", ans.Body, err)
	}
	ans, err := do(t, tab, "big", age(), never(t))
	if err != nil || ans.Status != 409 || !strings.Contains(string(ans.Body), "more than the 10") {
		t.Fatalf("asking again for an oversized answer: %d %s %v, want 409 saying it was not kept", ans.Status, ans.Body, err)
	}
}

// TestKeptAnswersExpire: an answer berth never collected goes after the
// TTL, and leaves the mark that keeps a takeover from running it again.
func TestKeptAnswersExpire(t *testing.T) {
	tab := opruns.New(upAnHour(opruns.Options{TTL: 20 * time.Millisecond}))
	defer tab.Close()
	age := since()
	if _, err := do(t, tab, "old", 0, answer("old")); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for n := 0; ; n++ {
		// Each new run gives the table a chance to sweep.
		if _, err := do(t, tab, "tick-"+strings.Repeat("x", n%50+1), 0, answer("")); err != nil {
			t.Fatal(err)
		}
		if _, err := do(t, tab, "old", age(), never(t)); err != nil {
			wantCode(t, err, wire.CodeConflict, "let go of outcomes")
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the answer was still kept %s after its TTL", deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
