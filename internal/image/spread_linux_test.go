//go:build linux

package image

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLayersSpreadOnExt4: on ext2/3/4 the folder layers are unpacked in
// carries the Orlov "top of unrelated trees" flag (chattr +T), so each
// layer's files are made in a block group of their own (see
// spreadLayers); elsewhere the cache opens all the same.
func TestLayersSpreadOnExt4(t *testing.T) {
	c := openCache(t, nil, Options{})
	tmp := filepath.Join(c.dir, tmpDir)
	var st unix.Statfs_t
	if err := unix.Statfs(tmp, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.EXT4_SUPER_MAGIC {
		t.Skipf("the cache is on a filesystem of type %#x, not ext2/3/4, which has no such flag", st.Type)
	}
	fd, err := unix.Open(tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	if flags&fsTopdirFl == 0 {
		t.Fatalf("%s has flags %#x, without FS_TOPDIR_FL", tmp, flags)
	}
}
