package process

import (
	"os/exec"
	"testing"
)

func TestRunningTellsAReusedPid(t *testing.T) {
	self, err := Self()
	if err != nil || !self.Running() {
		t.Fatalf("Self() = %+v, %v; want a running process", self, err)
	}
	if (ID{Pid: self.Pid, Start: self.Start + 1}).Running() {
		t.Fatal("a process with the same pid and another start time counts as running")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child, err := Of(cmd.Process.Pid)
	cmd.Wait()
	if err == nil && child.Running() {
		t.Fatalf("exited child %+v counts as running", child)
	}
	if (ID{}).Running() {
		t.Fatal("the zero ID counts as running")
	}
}
