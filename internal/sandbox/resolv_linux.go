package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const resolvConf = "/etc/resolv.conf"

// setResolvConf makes content the sandbox's /etc/resolv.conf. It runs
// after pivot_root, so every path resolves inside the sandbox's own root
// and nothing an image made (a symlink to a host path, say) reaches the
// host. Nothing of the sandbox runs yet.
func setResolvConf(content string, imageRoot bool) error {
	if imageRoot {
		// The image's root is the sandbox's own and writable: its file
		// (or symlink) is replaced in the sandbox's upper.
		if err := os.Remove(resolvConf); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(resolvConf), 0o755); err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		return writeNew(resolvConf, content)
	}
	// The host system's /etc is read-only: a file of the sandbox's
	// private /run is mounted over the host's.
	own := "/run/berth-resolv.conf"
	if err := writeNew(own, content); err != nil {
		return err
	}
	st, err := os.Lstat(resolvConf)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil // no /etc/resolv.conf to cover: the resolver's default is the loopback anyway
	case err != nil:
		return fmt.Errorf("resolv.conf: %w", err)
	case st.Mode().IsRegular():
		if err := unix.Mount(own, resolvConf, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount resolv.conf: %w", err)
		}
		return nil
	case st.Mode()&os.ModeSymlink != 0:
		// systemd-resolved's hosts link it into /run, which is the
		// sandbox's own here: the file is made where the link points.
		target, err := os.Readlink(resolvConf)
		if err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(resolvConf), target)
		}
		target = filepath.Clean(target)
		if !strings.HasPrefix(target, "/run/") {
			return fmt.Errorf("resolv.conf links to %s, outside the sandbox's /run: DNS inside the sandbox would use the host's resolver", target)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		return writeNew(target, content)
	default:
		return fmt.Errorf("resolv.conf is neither a file nor a link (%s)", st.Mode())
	}
}

// writeNew writes a new file, never through a link.
func writeNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
