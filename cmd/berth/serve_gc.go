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
// CPU per call. 400 collects a fifth as often.
const gcPercent = 400

// gcHeadroom is what berth's memory limit allows beyond the answer
// budget: the heap besides answers (caches, requests in flight, results
// being encoded) has measured well under it.
const gcHeadroom = 96 << 20

// setGC applies berth's collector settings unless the environment sets
// GOGC or GOMEMLIMIT, which then rule as for any Go program. A soft
// memory limit of the answer budget plus gcHeadroom (192 MiB by default)
// keeps the higher GOGC from letting a large heap grow five-fold: the
// collector runs whenever the heap reaches the limit, so a heap that
// GOGC=100 would have let reach twice its live size stays lower. A live
// heap over the limit (more results being encoded at once than the
// budget counts) makes the collector run more often, at most about half
// the CPU (Go's cap), rather than memory double.
func setGC(answerMemory int64, log *slog.Logger) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := answerMemory + gcHeadroom
	debug.SetGCPercent(gcPercent)
	debug.SetMemoryLimit(limit)
	log.Debug("garbage collector", "gogc", gcPercent, "memory_limit_bytes", limit)
}
