//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/process"
)

// proc is a sandbox's top process: the init of a confined sandbox, the
// agent itself of an unconfined one. done closes when it has exited.
type proc struct {
	record
	id   string
	own  bool // started by this runtime, so Wait reaps it
	done chan struct{}
	// status is how it exited, known for own processes only.
	status *syscall.WaitStatus
	// stopping is set when berth stops it, so its exit is no news.
	stopping bool
	// foundDead marks a sandbox whose process was gone when this
	// runtime started.
	foundDead bool
}

// record is what the next orchestrator needs to adopt a sandbox, kept in
// <server dir>/sandbox.json.
type record struct {
	// process.ID tells the recorded process from a later one given the
	// same pid.
	process.ID
	Cgroups []string `json:"cgroups,omitempty"`
}

const recordFile = "sandbox.json"

func (r *Runtime) writeRecord(id string, rec record) error {
	b, _ := json.Marshal(rec)
	tmp := filepath.Join(r.dir(id), recordFile+".new")
	if err := writeFileNoFollow(tmp, b); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return os.Rename(tmp, filepath.Join(r.dir(id), recordFile))
}

func (r *Runtime) readRecord(id string) (record, error) {
	b, err := readFileNoFollow(filepath.Join(r.dir(id), recordFile), 64<<10)
	if err != nil {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, fmt.Errorf("sandbox record of %s: %w", id, err)
	}
	return rec, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// describe says how the process ended.
func (p *proc) describe() string {
	switch {
	case p.foundDead:
		return "its agent was not running when berth started"
	case p.status == nil:
		return "its agent exited"
	case p.status.Signaled():
		return "its init was killed by signal " + p.status.Signal().String()
	case p.status.ExitStatus() == 125:
		return "its init failed to build the sandbox"
	case p.status.ExitStatus() > 128:
		return "its agent was killed by signal " + syscall.Signal(p.status.ExitStatus()-128).String()
	default:
		return "its agent exited with status " + strconv.Itoa(p.status.ExitStatus())
	}
}

// adopt watches a process an earlier orchestrator started. Its exit is
// seen through a pidfd, which becomes readable when the process ends.
func (r *Runtime) adopt(id string, rec record) *proc {
	p := &proc{record: rec, id: id, done: make(chan struct{})}
	fd, err := unix.PidfdOpen(rec.Pid, 0)
	// Checked after opening: the pidfd then pins the process we checked.
	if err != nil || !rec.ID.Running() {
		if err == nil {
			unix.Close(fd)
		}
		p.foundDead = true
		close(p.done)
		return p
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(r.wakeR.Fd()), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err != nil && !errors.Is(err, unix.EINTR) {
				// Cannot wait: look now and then instead.
				for r.running(p) {
					select {
					case <-r.closed:
						return
					case <-time.After(time.Second):
					}
				}
				break
			}
			if fds[1].Revents != 0 {
				return // the runtime is closing; the next one adopts it
			}
			if fds[0].Revents != 0 {
				break
			}
		}
		close(p.done)
		r.exited(p)
	}()
	return p
}

// running checks an adopted process by its pid and start time.
func (r *Runtime) running(p *proc) bool { return p.ID.Running() }
