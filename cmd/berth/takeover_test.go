package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestCommandSurvivesAKilledServe runs a command through the real
// `berth serve`, kills the server with SIGKILL while the command runs,
// and starts another on the same data directory: it takes the operation
// over when the lease ends and records the command's real output, and
// the command ran once.
func TestCommandSurvivesAKilledServe(t *testing.T) {
	berthBin := buildBerth(t)
	data := embeddedDataDir(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	first := startServeAs(t, berthBin, data, env, nil, "--operation-lease", "3s")
	tok := berthCommand(t, berthBin, "token", "create", "--user", "ops", "--data-dir", data)
	client := apiCall(t, first.url, tok, "POST", "/api/clients", `{"name":"killed"}`)
	op := apiCall(t, first.url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base","wait_seconds":120}`, client["id"]))
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	server := op["server_id"].(string)
	run := apiCall(t, first.url, tok, "POST", "/api/servers/"+server+"/bash",
		`{"command":"echo ran >> runs; while [ ! -e go-on ]; do sleep 0.05; done; echo survived"}`)
	id, _ := run["id"].(string)
	if id == "" {
		t.Fatalf("run_bash_command: %v", run)
	}
	exec := func(url, command string) string {
		t.Helper()
		out := apiCall(t, url, tok, "POST", "/api/servers/"+server+"/sessions/probe/exec", fmt.Sprintf(`{"command":%q}`, command))
		s, _ := out["stdout"].(string)
		return s
	}
	end := time.Now().Add(90 * time.Second)
	for exec(first.url, "test -e runs && echo yes; true") != "yes\n" {
		if time.Now().After(end) {
			t.Fatal("the command did not start within 90s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	first.cmd.Process.Signal(syscall.SIGKILL)
	first.wait()
	second := startServeAs(t, berthBin, data, env, nil, "--operation-lease", "3s")
	exec(second.url, "touch go-on")
	done := apiCall(t, second.url, tok, "GET", "/api/operations/"+id+"?wait_seconds=120", "")
	result, _ := done["result"].(map[string]any)
	if done["status"] != "SUCCEEDED" || result["stdout"] != "survived\n" {
		t.Fatalf("the command of the killed server: %v", done)
	}
	if n := exec(second.url, "wc -l < runs"); n != "1\n" {
		t.Fatalf("the command ran %q times, want once", n)
	}
	apiCall(t, second.url, tok, "DELETE", "/api/servers/"+server, "")
}
