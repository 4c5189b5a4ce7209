// Package e2e holds end-to-end tests of the real `berth serve` binary run
// as its own process against a real PostgreSQL and real sandboxes, for
// what only a separate process shows: its peak memory (VmHWM), measured
// from outside while sandboxes and hostile stand-ins for their agents
// answer it. It has no code of its own.
package e2e
