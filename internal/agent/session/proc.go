package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// commandTargets picks, among the descendants of a shell whose process
// group is shellPID, what a call that began at tick since started: every
// process group none of whose members predates the call, and the
// processes in the shell's own group (command substitutions) that started
// since. Background jobs from earlier calls are left alone unless all is
// set.
func commandTargets(shellPID int, since uint64, all bool) (groups, pids []int) {
	procs, err := descendants(shellPID)
	if err != nil {
		return nil, nil
	}
	fmt.Fprintf(os.Stderr, "DEBUG since=%d all=%v procs=%+v\n", since, all, procs)
	old := make(map[int]bool)
	for _, p := range procs {
		if p.pgid == shellPID {
			if all || p.start >= since {
				pids = append(pids, p.pid)
			}
			continue
		}
		if _, seen := old[p.pgid]; !seen {
			old[p.pgid] = false
		}
		if !all && p.start < since {
			old[p.pgid] = true
		}
	}
	for g, isOld := range old {
		if !isOld {
			groups = append(groups, g)
		}
	}
	return groups, pids
}
