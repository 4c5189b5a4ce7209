// Package process tells a running host process from a later one that the
// kernel gave the same pid: a process is named by its pid and its start
// time, which berth records for what it must find again after a restart
// (a sandbox's init, whoever started the embedded database).
package process

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ID names one process for its whole life.
type ID struct {
	Pid int `json:"pid"`
	// Start is the start time in clock ticks after boot (/proc/<pid>/stat
	// field 22).
	Start uint64 `json:"start"`
}

// Of returns the ID of the running process pid. A zombie, which has
// exited and only waits to be reaped, counts as gone.
func Of(pid int) (ID, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ID{}, err
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ID{}, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return ID{}, errors.New("malformed /proc stat")
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return ID{}, os.ErrNotExist
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return ID{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return ID{Pid: pid, Start: start}, nil
}

// Self is the calling process's ID.
func Self() (ID, error) { return Of(os.Getpid()) }

// Running reports whether the process id names still runs.
func (id ID) Running() bool {
	if id.Pid <= 0 {
		return false
	}
	now, err := Of(id.Pid)
	return err == nil && now == id
}
