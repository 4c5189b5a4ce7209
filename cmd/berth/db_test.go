package main

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/berth-mcp/berth/internal/dirlock"
)

// TestCommandLeavesAdoptedClusterToServe: a short-lived command that
// started the embedded database stops it at exit, unless a server took
// the data directory's lock in the meantime (it adopted the database and
// is using it).
func TestCommandLeavesAdoptedClusterToServe(t *testing.T) {
	ctx := context.Background()
	data := embeddedDataDir(t)
	db := dbFlags{dataDir: data}
	log := slog.New(slog.DiscardHandler)
	running := func() bool {
		_, err := os.Stat(postmasterPID(data))
		return err == nil
	}

	// Only serve creates a berth; it stops the database it started.
	_, closeDB, err := db.openDB(ctx, log, true)
	if err != nil {
		t.Fatal(err)
	}
	closeDB()
	if running() {
		t.Fatal("serve left running the embedded database it started")
	}

	_, closeDB, err = db.openDB(ctx, log, false)
	if err != nil {
		t.Fatal(err)
	}
	closeDB()
	if running() {
		t.Fatal("a command left running the embedded database it started, with no server around")
	}

	_, closeDB, err = db.openDB(ctx, log, false)
	if err != nil {
		t.Fatal(err)
	}
	serveLock, err := dirlock.TryLock(data, dirlock.Holder{PID: os.Getpid(), Command: "berth serve"})
	if err != nil {
		t.Fatal(err)
	}
	closeDB()
	serveLock.Close()
	if !running() {
		t.Fatal("the command stopped the embedded database under a running server")
	}
}
