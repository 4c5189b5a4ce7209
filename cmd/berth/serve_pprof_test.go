package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/store/storetest"
)

// --pprof-listen serves profiles only on loopback: they hold every
// request's stacks and timings, so an address others can reach is
// refused rather than served.
func TestPprofListenIsLoopbackOnly(t *testing.T) {
	st := storetest.New(t)
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "localhost:0", "nonsense"} {
		if err := listenPprof(t.Context(), addr, st.Pool, log); err == nil || !strings.Contains(err.Error(), "--pprof-listen") {
			t.Errorf("--pprof-listen %s: %v, want a refusal naming the flag", addr, err)
		}
	}

	// Find a free loopback port, then serve there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := listenPprof(ctx, addr, st.Pool, log); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pgxpool")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stat poolStat
	if err := json.NewDecoder(resp.Body).Decode(&stat); err != nil || stat.MaxConns == 0 {
		t.Errorf("pool counters: %+v, %v", stat, err)
	}
	resp, err = http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("goroutine profile: %s", resp.Status)
	}
}
