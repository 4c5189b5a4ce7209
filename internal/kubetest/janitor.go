package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// janitor kills the container process groups a test binary leaves when
// it dies without cleaning up (the panic of a test timeout, a SIGKILL):
// Pdeathsig ends each container's main process, but not what that
// process started. It is a shell in a process group of its own, reading
// a pipe from the test binary; when the pipe closes, however the test
// binary ended, it kills the groups listed in a file the kubelet keeps.
type janitor struct {
	mu    sync.Mutex
	file  string
	pgids map[int]bool
	pipe  *os.File // write end: closing it sets the janitor off
	cmd   *exec.Cmd
	done  chan struct{}
}

// janitorScript ignores the signals a terminal sends the test's group,
// waits for the pipe to close, then kills every listed group.
const janitorScript = `trap '' INT TERM HUP
while read -r _; do :; done
for g in $(cat "$0" 2>/dev/null); do kill -KILL "-$g" 2>/dev/null; done`

func startJanitor(dir string) (*janitor, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("janitor: %w", err)
	}
	defer r.Close() // the janitor has its own copy
	j := &janitor{file: filepath.Join(dir, "process-groups"), pgids: map[int]bool{}, pipe: w, done: make(chan struct{})}
	j.cmd = exec.Command("/bin/sh", "-c", janitorScript, j.file)
	j.cmd.Stdin = r
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("janitor: %w", err)
	}
	go func() {
		_ = j.cmd.Wait()
		close(j.done)
	}()
	return j, nil
}

// add and remove keep the list of live container process groups.
func (j *janitor) add(pgid int)    { j.update(pgid, true) }
func (j *janitor) remove(pgid int) { j.update(pgid, false) }

func (j *janitor) update(pgid int, live bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if live {
		j.pgids[pgid] = true
	} else {
		delete(j.pgids, pgid)
	}
	ids := make([]string, 0, len(j.pgids))
	for g := range j.pgids {
		ids = append(ids, strconv.Itoa(g))
	}
	sort.Strings(ids)
	// Replaced whole, so the janitor never reads half a list.
	tmp := j.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err == nil {
		_ = os.Rename(tmp, j.file)
	}
}

// close lets the janitor go (it kills whatever is still listed) and
// waits for it.
func (j *janitor) close() {
	j.pipe.Close()
	<-j.done
}
