package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/berth-mcp/berth/internal/wire"
)

// escapeText is the text of os.Root's unexported error for a path or
// symlink that leaves the root; there is no exported value to compare to.
const escapeText = "path escapes from parent"

// fsError turns an error from a file operation on disp into a coded error
// naming the operation and the path. The system error stays wrapped so
// errors.Is(err, fs.ErrNotExist) keeps working.
func fsError(op, disp string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", op, disp, err)
	}
	if isEscape(err) {
		return wire.Errorf(wire.CodeForbidden, "%s %s: path escapes the workspace", op, disp)
	}
	inner := err
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		inner = pe.Err
	case errors.As(err, &le):
		inner = le.Err
	case errors.As(err, &se):
		inner = se.Err
	}
	code := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = wire.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = wire.CodeConflict
	case errors.Is(err, fs.ErrPermission):
		code = wire.CodeForbidden
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.ELOOP),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL):
		code = wire.CodeBadRequest
	}
	if code == "" {
		return fmt.Errorf("%s %s: %w", op, disp, err)
	}
	return wire.Errorf(code, "%s %s: %w", op, disp, inner)
}

func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == escapeText {
			return true
		}
	}
	return false
}
