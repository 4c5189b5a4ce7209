package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSurvivesACrash runs the real `berth serve` with its embedded
// database, kills it with SIGKILL while a sandbox runs, and starts it
// again on the same data dir: the lock died with the process, the database
// and the sandbox are adopted, and the sandbox keeps its files. The
// database's starter (the first server) is gone, so the second server,
// holding the data directory, takes it over and its clean stop stops it.
func TestServeSurvivesACrash(t *testing.T) {
	berthBin := buildBerth(t)
	data := embeddedDataDir(t)

	first := startServe(t, berthBin, data)
	tok := berthCommand(t, berthBin, "token", "create", "--user", "ops", "--data-dir", data)
	client := apiCall(t, first.url, tok, "POST", "/api/clients", `{"name":"crash"}`)
	op := apiCall(t, first.url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base","wait_seconds":120}`, client["id"]))
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	server := op["server_id"].(string)
	apiCall(t, first.url, tok, "POST", "/api/servers/"+server+"/sessions/s/exec", `{"command":"echo kept > note.txt"}`)

	first.cmd.Process.Signal(syscall.SIGKILL)
	first.wait()

	second := startServe(t, berthBin, data)
	got := apiCall(t, second.url, tok, "GET", "/api/servers/"+server, "")
	if got["status"] != "RUNNING" {
		t.Fatalf("after the crash the server is %v", got["status"])
	}
	out := apiCall(t, second.url, tok, "POST", "/api/servers/"+server+"/sessions/s/exec", `{"command":"cat note.txt"}`)
	if out["stdout"] != "kept\n" {
		t.Fatalf("the sandbox lost its files across the crash: %v", out)
	}
	apiCall(t, second.url, tok, "DELETE", "/api/servers/"+server, "")

	second.cmd.Process.Signal(syscall.SIGTERM)
	if err := second.wait(); err != nil {
		t.Fatalf("berth serve exited with %v after SIGTERM", err)
	}
	if _, err := os.Stat(postmasterPID(data)); !os.IsNotExist(err) {
		t.Fatalf("the embedded database of a crashed server still runs after its successor stopped (%v)", err)
	}
}

// TestSecondServeOnTheSameDataDir starts a second `berth serve` on the
// data directory of a running one: it refuses before touching the
// database, naming the running server's pid and URL, and the first keeps
// answering, also next to `berth token create` and `berth migrate`. The
// first started the embedded database, so its clean stop stops it.
func TestSecondServeOnTheSameDataDir(t *testing.T) {
	berthBin := buildBerth(t)
	data := embeddedDataDir(t)
	first := startServe(t, berthBin, data)
	tok := berthCommand(t, berthBin, "token", "create", "--user", "ops", "--data-dir", data)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, berthBin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0")
	second.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the second serve ended with %v, want a non-zero exit:\n%s", err, out)
	}
	for _, want := range []string{"is in use", "pid " + strconv.Itoa(first.cmd.Process.Pid), first.url, "another --data-dir"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the second serve's message does not name %q:\n%s", want, out)
		}
	}

	stillServes := func(when string) {
		t.Helper()
		resp, err := http.Get(first.url + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s, /readyz of the first server: %v %v\n%s", when, resp, err, first.log.String())
		}
		resp.Body.Close()
		if c := apiCall(t, first.url, tok, "POST", "/api/clients", `{"name":"still"}`); c["id"] == nil {
			t.Fatalf("%s, the first server registered no client: %v", when, c)
		}
	}
	stillServes("after the second serve")
	if got := berthCommand(t, berthBin, "token", "create", "--user", "ops", "--data-dir", data); got == "" {
		t.Fatal("token create next to a running serve printed no token")
	}
	berthCommand(t, berthBin, "migrate", "--data-dir", data)
	stillServes("after token create and migrate")

	first.cmd.Process.Signal(syscall.SIGTERM)
	if err := first.wait(); err != nil {
		t.Fatalf("berth serve exited with %v after SIGTERM", err)
	}
	if _, err := os.Stat(postmasterPID(data)); !os.IsNotExist(err) {
		t.Fatalf("the embedded database the server started still runs after it stopped (%v)", err)
	}
}
