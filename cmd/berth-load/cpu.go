package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on every
// Linux berth runs on).
const clockTick = 10 * time.Millisecond

// cpuWatch is --cpu: the processes whose CPU time berth-load charges to
// each round's calls, besides its own and its children's (the bare
// agents). Each named process is reported alone and with its descendants
// apart ("berth" and "berth+": the server, then its sandboxes), since on
// a shared machine CPU per call is what the load does not move.
type cpuWatch struct {
	names []string
	pids  []int
}

func parseCPUWatch(s string) (cpuWatch, error) {
	var w cpuWatch
	for _, part := range strings.Split(s, ",") {
		name, pid, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || strings.ContainsAny(name, "+ ") || err != nil || n <= 0 {
			return cpuWatch{}, fmt.Errorf("--cpu: want NAME=PID[,NAME=PID...], got %q", part)
		}
		w.names, w.pids = append(w.names, name), append(w.pids, n)
	}
	return w, nil
}

// cpuKeys are the columns of a sample, in the order they print.
func (w cpuWatch) keys() []string {
	var k []string
	for _, n := range w.names {
		k = append(k, n, n+"+")
	}
	return append(k, "berth-load", "berth-load+")
}

// procTimes is one process's line of /proc/<pid>/stat.
type procTimes struct {
	ppid       int
	self, kids time.Duration // its own user+system time; its reaped children's
}

// sample reads every process's CPU time and sums it per key.
func (w cpuWatch) sample() (map[string]time.Duration, error) {
	procs, err := readProcs()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	// descendants is what pid's subtree used, without pid's own time: the
	// live descendants' time and what every reaped one left its parent.
	var descendants func(pid int) time.Duration
	descendants = func(pid int) time.Duration {
		d := procs[pid].kids
		for _, c := range children[pid] {
			d += procs[c].self + descendants(c)
		}
		return d
	}
	s := map[string]time.Duration{}
	roots := append(append([]int(nil), w.pids...), os.Getpid())
	names := append(append([]string(nil), w.names...), "berth-load")
	for i, pid := range roots {
		if _, ok := procs[pid]; !ok {
			return nil, fmt.Errorf("--cpu: no process %d (%s)", pid, names[i])
		}
		s[names[i]], s[names[i]+"+"] = procs[pid].self, descendants(pid)
	}
	return s, nil
}

func readProcs() (map[int]procTimes, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(dirs) == 0 {
		return nil, errors.New("--cpu needs Linux's /proc")
	}
	procs := make(map[int]procTimes, len(dirs))
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it ended meanwhile
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		// The command name is in parentheses and may hold spaces or ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) < 15 {
			continue
		}
		tick := func(k int) time.Duration { n, _ := strconv.ParseInt(f[k], 10, 64); return time.Duration(n) * clockTick }
		ppid, _ := strconv.Atoi(f[1])
		procs[pid] = procTimes{ppid: ppid, self: tick(11) + tick(12), kids: tick(13) + tick(14)}
	}
	return procs, nil
}

// cpuPerCall is what each key used between two samples, per call.
func cpuPerCall(before, after map[string]time.Duration, calls int) map[string]time.Duration {
	per := map[string]time.Duration{}
	for k, a := range after {
		per[k] = (a - before[k]) / time.Duration(max(calls, 1))
	}
	return per
}

// formatCPU prints a round's CPU per call, key by key, and their sum.
func formatCPU(keys []string, per map[string]time.Duration) string {
	var b strings.Builder
	var total time.Duration
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d us  ", k, per[k].Microseconds())
		total += per[k]
	}
	fmt.Fprintf(&b, "total %d us", total.Microseconds())
	return b.String()
}
