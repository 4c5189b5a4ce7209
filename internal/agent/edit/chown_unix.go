//go:build unix

package edit

import (
	"io/fs"
	"os"
	"syscall"
)

// chownLike gives f the owner of like, so that an agent running as root
// does not take over the user's files by editing them. It is best effort:
// an unprivileged agent can only keep its own files, which it already owns.
func chownLike(f *os.File, like fs.FileInfo) {
	if st, ok := like.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
}
