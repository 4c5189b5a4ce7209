package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test binary that dies without cleaning up (as on a test timeout's
// panic) leaves no container process group behind: its janitor kills
// them, children included.
func TestJanitorOutlivesTestBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_JANITOR_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper said %q", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(groupAlive(t, pgid)) > 0 {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			t.Fatalf("group %d outlived the test binary by 30s", pgid)
		}
		<-tick.C
	}
}

// janitorHelper is the dying test binary: it starts a janitor and a
// process group with a child, prints the group and exits at once.
func janitorHelper(dir string) {
	j, err := startJanitor(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cmd := exec.Command("sh", "-c", "sleep 1000 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	j.add(cmd.Process.Pid)
	fmt.Println(cmd.Process.Pid)
	os.Exit(0) // no cleanup: the kernel closes the janitor's pipe
}
