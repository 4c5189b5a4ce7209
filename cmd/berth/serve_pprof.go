package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	goruntime "runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pprofRates are the mutex and block profile rates `--pprof-listen` turns
// on: one contention event in 5 and blocking of 10 us or more, enough to
// see which lock a loaded replica queues on at a cost too small to move
// the figures it is there to explain.
const (
	pprofMutexFraction = 5
	pprofBlockRateNs   = 10_000
)

// listenPprof serves Go's runtime profiles and the database pool's
// counters on addr, which must be a loopback address: profiles show
// stacks, arguments and timing of every request, so they are for whoever
// is at the machine, never for the network berth serves. The listener
// closes with ctx.
func listenPprof(ctx context.Context, addr string, pool *pgxpool.Pool, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--pprof-listen %q: want a loopback address such as 127.0.0.1:6060 (profiles reveal every request's stacks)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen: %w", err)
	}
	goruntime.SetMutexProfileFraction(pprofMutexFraction)
	goruntime.SetBlockProfileRate(pprofBlockRateNs)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pgxpool", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(poolStats(pool.Stat()))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}

// poolStat is pgxpool's Stat as JSON: how often a request found no idle
// connection and how long acquiring took in all.
type poolStat struct {
	AcquireCount         int64   `json:"acquire_count"`
	EmptyAcquireCount    int64   `json:"empty_acquire_count"`
	CanceledAcquireCount int64   `json:"canceled_acquire_count"`
	AcquireDurationMs    float64 `json:"acquire_duration_ms"`
	AcquiredConns        int32   `json:"acquired_conns"`
	IdleConns            int32   `json:"idle_conns"`
	TotalConns           int32   `json:"total_conns"`
	MaxConns             int32   `json:"max_conns"`
	NewConnsCount        int64   `json:"new_conns_count"`
}

func poolStats(s *pgxpool.Stat) poolStat {
	return poolStat{
		AcquireCount: s.AcquireCount(), EmptyAcquireCount: s.EmptyAcquireCount(),
		CanceledAcquireCount: s.CanceledAcquireCount(),
		AcquireDurationMs:    float64(s.AcquireDuration()) / float64(time.Millisecond),
		AcquiredConns:        s.AcquiredConns(), IdleConns: s.IdleConns(), TotalConns: s.TotalConns(),
		MaxConns: s.MaxConns(), NewConnsCount: s.NewConnsCount(),
	}
}
