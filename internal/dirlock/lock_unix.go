//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// lockExclusive takes an exclusive flock on f without waiting; held
// reports that another process has it.
func lockExclusive(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
