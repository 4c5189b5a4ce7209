//go:build linux

package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
)

// toolPrograms are what the shared runtime tests (runtimetest's attacks,
// conformance and lifecycle) run inside a sandbox.
var toolPrograms = []string{"bash", "sh", "cat", "ls", "id", "tr", "sleep", "dd", "touch", "stat", "setsid", "unshare",
	"rm", "ps", "printf", "mkdir", "head", "tail", "find", "yes", "xargs", "wc", "seq", "mount", "mknod", "ln", "true", "false",
	"grep", "basename", "env", "kill", "readlink", "python3"}

// tools is the layer of the tools image, built once per test binary.
var tools struct {
	once  sync.Once
	layer imagetest.Layer
}

// toolsImage pushes to reg an image the shared runtime tests run in
// unchanged, and returns its reference: the host's programs they use and
// the libraries those load, Python's standard library, and the host's
// passwd and group files (nobody), all from the host's system
// directories, as a sandbox of the host system would find them.
func toolsImage(t *testing.T, reg *imagetest.Registry) string {
	t.Helper()
	tools.once.Do(func() { tools.layer = imagetest.GzLayer(t, imagetest.Tar(t, toolsEntries(t)...)) })
	if tools.layer.Blob == nil {
		t.Fatal("the tools image could not be built")
	}
	reg.Push(t, "tools:1", imagetest.ImageSpec{Config: imagetest.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}},
		tools.layer)
	return reg.Host + "/tools:1"
}

func toolsEntries(t *testing.T) []imagetest.Entry {
	var paths []string
	for _, p := range toolPrograms {
		path := systemProgram(p)
		if path == "" {
			t.Skipf("no %s in the host's system directories", p)
		}
		paths = append(paths, path)
	}
	stdlib, err := exec.Command("/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))").Output()
	if err != nil {
		t.Skipf("no system python3: %v", err)
	}
	lib := strings.TrimSpace(string(stdlib))
	dynload, _ := filepath.Glob(filepath.Join(lib, "lib-dynload", "*.so"))
	paths = append(paths, dynload...)
	ents := []imagetest.Entry{imagetest.Dir("etc/"), imagetest.Dir("tmp/"), imagetest.Dir("usr/"), imagetest.Dir("usr/local/"),
		imagetest.Dir("opt/")}
	ents[1].Mode = 0o1777
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, imagetest.File(strings.TrimPrefix(f, "/"), string(b)))
	}
	ents = append(ents, imagetest.HostFiles(t, paths...)...)
	skip := map[string]bool{"test": true, "__pycache__": true, "idlelib": true, "tkinter": true, "ensurepip": true, "lib2to3": true,
		"pydoc_data": true, "turtledemo": true, "distutils": true}
	ents = append(ents, imagetest.HostTree(t, lib, func(rel string) bool { return skip[filepath.Base(rel)] })...)
	return imagetest.Unique(ents)
}

// systemProgram is the path of a program in the directories a sandbox's
// PATH names, or "".
func systemProgram(name string) string {
	for _, dir := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
