//go:build linux

package egresstest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// Internets alive at once take different slots, and each answers on its
// own addresses with its own DNS.
func TestInternetsSideBySide(t *testing.T) {
	a, b, c := Start(t), Start(t), Start(t)
	seen := map[int]bool{}
	for _, inet := range []*Internet{a, b, c} {
		if seen[inet.Slot] {
			t.Fatalf("slot %d taken twice", inet.Slot)
		}
		seen[inet.Slot] = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		addrs, err := inet.Resolver().LookupNetIP(ctx, "ip4", "files.test")
		cancel()
		if err != nil || len(addrs) != 1 || addrs[0] != inet.Addr("files.test") || !inet.Prefix.Contains(addrs[0]) {
			t.Errorf("slot %d: files.test is %v (%v), want %s", inet.Slot, addrs, err, inet.Addr("files.test"))
		}
		hc := inet.HTTPClient()
		if body := fetch(t, hc, "https://files.test/hello"); body != Hello {
			t.Errorf("slot %d: %q", inet.Slot, body)
		}
		hc.CloseIdleConnections()
	}
}

// When every slot is taken, acquireSlot waits until its deadline, and
// gets a slot as soon as one is freed.
func TestSlotWaitsWhenAllAreTaken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to lock under /run")
	}
	var held []*slotLock
	defer func() {
		for _, l := range held {
			l.release()
		}
	}()
	for n := range Slots {
		l, err := tryLock(n)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			t.Skipf("slot %d is held by another test binary", n)
		}
		held = append(held, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if l, err := acquireSlot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		if l != nil {
			l.release()
		}
		t.Fatalf("acquireSlot with every slot held: %v, want a deadline error", err)
	}
	freed := held[5]
	held = append(held[:5], held[6:]...)
	got := make(chan *slotLock, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := acquireSlot(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	freed.release()
	l := <-got
	if l == nil || l.n != 5 {
		t.Fatalf("got %+v, want slot 5", l)
	}
	l.release()
}
