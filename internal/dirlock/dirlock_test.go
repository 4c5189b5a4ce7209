package dirlock_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/dirlock"
)

func TestOneHolderAtATime(t *testing.T) {
	dir := t.TempDir()
	first, err := dirlock.TryLock(dir, dirlock.Holder{PID: os.Getpid(), Command: "berth serve"})
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file, so a second open in the same
	// process is refused like another process would be.
	_, err = dirlock.TryLock(dir, dirlock.Holder{PID: 1, Command: "berth serve"})
	var held *dirlock.HeldError
	if !errors.As(err, &held) || held.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "not listening yet") {
		t.Fatalf("second lock: %v", err)
	}

	if err := first.Update(dirlock.Holder{PID: os.Getpid(), Command: "berth serve", URL: "http://127.0.0.1:8080"}); err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.TryLock(dir, dirlock.Holder{PID: 1, Command: "berth serve"})
	if !errors.As(err, &held) || held.Holder.URL != "http://127.0.0.1:8080" {
		t.Fatalf("after the update: %v", err)
	}
	for _, want := range []string{"serve.lock", "berth serve", "http://127.0.0.1:8080", "pid "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}

	first.Close()
	again, err := dirlock.TryLock(dir, dirlock.Holder{PID: 2, Command: "berth token create"})
	if err != nil {
		t.Fatalf("after the holder let go: %v", err)
	}
	again.Close()
}

func TestUnreadableRecord(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.TryLock(dir, dirlock.Holder{PID: 7, Command: "berth serve"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A holder caught between truncating and writing its record.
	if err := os.WriteFile(dir+"/"+dirlock.FileName, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.TryLock(dir, dirlock.Holder{PID: 8, Command: "berth serve"})
	if err == nil || !strings.Contains(err.Error(), "locked by another berth process") {
		t.Fatalf("got %v", err)
	}
}
