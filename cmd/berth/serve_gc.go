package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// gcPercent is the GOGC berth serve runs with unless told otherwise.
// berth's live heap is small (a few MiB) and its allocation per call is
// not (the go-sdk alone allocates hundreds of KiB per MCP call), so with
// Go's default of 100 it collected every few MCP calls, a quarter of its
// CPU per MCP call. 400 collects a quarter as often.
const gcPercent = 400

// gcHeadroom is what berth's memory limit allows beyond the answer
// budget, for the rest of the heap: caches, requests in flight, results
// being encoded.
const gcHeadroom = 96 << 20

// setGC applies berth's collector settings unless the environment sets
// GOGC or GOMEMLIMIT, which then rule as for any Go program. A soft
// memory limit of the answer budget plus gcHeadroom (192 MiB by default)
// keeps the higher GOGC from letting a large heap grow five-fold: the
// collector runs whenever the heap reaches the limit, so the heap stays
// under it while the live heap does (GOGC=100 allowed twice the live
// heap, whatever its size). A live heap over the limit (more results
// being encoded at once than the budget counts) makes the collector run
// more often, at most about half the CPU (Go's cap), rather than memory
// double. See docs/design.md, "Memory and the collector".
func setGC(answerMemory int64, log *slog.Logger) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := answerMemory + gcHeadroom
	debug.SetGCPercent(gcPercent)
	debug.SetMemoryLimit(limit)
	log.Debug("garbage collector", "gogc", gcPercent, "memory_limit_bytes", limit)
}
