package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procInfo is what the process walk needs from /proc/<pid>/stat.
type procInfo struct {
	pid, ppid, pgid int
	start           uint64 // clock ticks after boot
}

// readStat parses /proc/<pid>/stat. The command name sits in parentheses
// and may hold spaces or parentheses itself, so fields are counted from
// the last ')'.
func readStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	// After ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime ...
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	p := procInfo{pid: pid}
	if p.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat ppid: %w", pid, err)
	}
	if p.pgid, err = strconv.Atoi(f[2]); err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat pgrp: %w", pid, err)
	}
	if p.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat starttime: %w", pid, err)
	}
	return p, nil
}

// descendants lists every live process below root, found through the
// parent links in /proc. Processes that vanish during the walk are
// skipped.
func descendants(root int) ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	children := make(map[int][]procInfo)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		p, err := readStat(pid)
		if err != nil {
			continue
		}
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out, nil
}

// bootTicks returns the time since boot in the clock ticks of
// /proc/<pid>/stat starttime (USER_HZ, 100 on Linux), read from
// /proc/uptime so that both come from the same clock.
func bootTicks() (uint64, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("read uptime: empty")
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parse uptime: %w", err)
	}
	return uint64(secs * 100), nil
}

// signalTargets sends sig to the given process groups and single
// processes, and SIGCONT after it so that a stopped process sees a
// SIGTERM now rather than when someone resumes it.
func signalTargets(groups, pids []int, sig syscall.Signal) {
	for _, g := range groups {
		syscall.Kill(-g, sig)
		if sig != syscall.SIGKILL {
			syscall.Kill(-g, syscall.SIGCONT)
		}
	}
	for _, p := range pids {
		syscall.Kill(p, sig)
		if sig != syscall.SIGKILL {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
}

// commandTargets picks what to signal among the descendants of the shell
// whose process group is shellPID. With all set that is everything.
// Otherwise it is what the current call started: every process group
// other than the shell's and the jobs the shell had before the call
// (oldJobs, by process group), and the processes in the shell's own group
// (command substitutions, jobs run with "set +m") that started at or after
// boot tick since.
func commandTargets(shellPID int, oldJobs []int, since uint64, all bool) (groups, pids []int) {
	procs, err := descendants(shellPID)
	if err != nil {
		return nil, nil
	}
	seen := make(map[int]bool)
	for _, p := range procs {
		switch {
		case p.pgid == shellPID:
			if all || p.start >= since {
				pids = append(pids, p.pid)
			}
		case seen[p.pgid]:
		case all || !slices.Contains(oldJobs, p.pgid):
			seen[p.pgid] = true
			groups = append(groups, p.pgid)
		}
	}
	return groups, pids
}

// waitDead waits until every process in pids has ended (is gone or a
// zombie), or limit has passed. SIGKILL takes effect when the process is
// next scheduled, not when kill returns.
func waitDead(pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// tagged lists the processes whose environment holds the entry tag
// ("NAME=value"). Every process a shell starts inherits the shell's tag
// unless it clears its environment, so this finds what double-forked or
// outlived the shell and so left its process tree.
func tagged(tag string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(tag + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
