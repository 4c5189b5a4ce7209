package fds

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary, run again, be the child of these tests.
const childEnv = "BERTH_FDS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child opens a descriptor of its own (as Go's runtime may before main),
// then prints the descriptors from 3 up it inherited (those without
// close-on-exec), calls CloseInherited(3), and prints each descriptor
// from 3 up still open with whether it is close-on-exec.
func child() int {
	own, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer own.Close()
	fmt.Println("own", own.Fd())
	list := func(what string) error {
		open, err := openDescriptors()
		if err != nil {
			return err
		}
		for _, fd := range open {
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if fd < 3 || err != nil {
				continue
			}
			cloexec := flags&unix.FD_CLOEXEC != 0
			if what == "open" || !cloexec {
				fmt.Println(what, fd, cloexec)
			}
		}
		return nil
	}
	if err := list("inherited"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := CloseInherited(3); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := list("open"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// rawPipe makes a pipe without close-on-exec, as a parent process that
// forgets to set it does; it is closed when the test ends.
func rawPipe(t *testing.T) [2]int {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]) })
	return p
}

// TestCloseInheritedKeepsOnlyWhatItIsTold starts a process with a
// descriptor it is handed on purpose (3), another handed by mistake (4)
// and a pipe its parent leaked without close-on-exec: only 3 is left,
// marked close-on-exec, with the descriptor the child opened itself.
func TestCloseInheritedKeepsOnlyWhatItIsTold(t *testing.T) {
	leak := rawPipe(t)
	passed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	stray, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = []*os.File{passed, stray}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	var own int
	inherited, open := map[int]bool{}, map[int]bool{}
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		fd, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "own":
			own = fd
		case "inherited":
			inherited[fd] = true
		case "open":
			open[fd] = f[2] == "true"
		}
	}
	if own == 0 || !inherited[3] || !inherited[4] || !inherited[leak[0]] || !inherited[leak[1]] {
		t.Fatalf("the child did not inherit 3, 4 and the pipe %v (the test proves nothing):\n%s", leak, out.String())
	}
	if cloexec, ok := open[3]; !ok || !cloexec {
		t.Errorf("descriptor 3, to keep, is not kept close-on-exec:\n%s", out.String())
	}
	if cloexec, ok := open[own]; !ok || !cloexec {
		t.Errorf("the child's own descriptor %d was closed:\n%s", own, out.String())
	}
	for fd := range inherited {
		if _, ok := open[fd]; ok && fd != 3 {
			t.Errorf("inherited descriptor %d is still open:\n%s", fd, out.String())
		}
	}
}

// TestCloseOnExecFromStopsALeak: a pipe made without close-on-exec
// reaches a child the process starts, until CloseOnExecFrom(3).
func TestCloseOnExecFromStopsALeak(t *testing.T) {
	leak := rawPipe(t)
	childFDs := func() []int {
		out, err := exec.Command("ls", "/proc/self/fd").Output()
		if err != nil {
			t.Fatal(err)
		}
		var fds []int
		for _, f := range strings.Fields(string(out)) {
			n, _ := strconv.Atoi(f)
			fds = append(fds, n)
		}
		return fds
	}
	if fds := childFDs(); !slices.Contains(fds, leak[1]) {
		t.Fatalf("the raw pipe %d did not reach the child (it has %v): the test proves nothing", leak[1], fds)
	}
	if err := CloseOnExecFrom(3); err != nil {
		t.Fatal(err)
	}
	if fds := childFDs(); slices.ContainsFunc(fds, func(fd int) bool { return fd == leak[0] || fd == leak[1] }) {
		t.Fatalf("the child still got the pipe %v: it has %v", leak, fds)
	}
	if _, err := unix.FcntlInt(uintptr(leak[1]), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the pipe was closed in this process: %v", err)
	}
}
