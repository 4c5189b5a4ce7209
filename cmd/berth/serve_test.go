package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSurvivesACrash runs the real `berth serve` with its embedded
// database, kills it with SIGKILL while a sandbox runs, and starts it
// again on the same data dir: the database and the sandbox are adopted,
// the sandbox keeps its files, and a clean stop leaves no process behind.
func TestServeSurvivesACrash(t *testing.T) {
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	for _, pkg := range []string{".", "../berth-agent"} {
		name := "berth"
		if pkg != "." {
			name = "berth-agent"
		}
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		build.Env = append(os.Environ(), goToolEnv...)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	// The embedded database runs as the postgres account: it must reach
	// the data dir.
	data := t.TempDir()
	for p := data; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	berthBin := filepath.Join(bin, "berth")

	serve := func() (*exec.Cmd, string) {
		t.Helper()
		cmd := exec.Command(berthBin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
		urls := make(chan string, 1)
		var log bytes.Buffer
		go func() {
			sc := bufio.NewScanner(stderr)
			re := regexp.MustCompile(`berth is serving on (http://\S+)`)
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					urls <- m[1]
				}
			}
		}()
		select {
		case url := <-urls:
			return cmd, url
		case <-time.After(2 * time.Minute):
			t.Fatalf("berth serve did not start:\n%s", log.String())
			return nil, ""
		}
	}
	call := func(url, token, method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var v map[string]any
		json.Unmarshal(raw, &v)
		return v
	}

	first, url := serve()
	tokOut, err := exec.Command(berthBin, "token", "create", "--user", "ops", "--data-dir", data).Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	tok := strings.TrimSpace(string(tokOut))
	client := call(url, tok, "POST", "/api/clients", `{"name":"crash"}`)
	op := call(url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base","wait_seconds":120}`, client["id"]))
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	server := op["server_id"].(string)
	call(url, tok, "POST", "/api/servers/"+server+"/sessions/s/exec", `{"command":"echo kept > note.txt"}`)

	first.Process.Signal(syscall.SIGKILL)
	first.Wait()

	second, url := serve()
	got := call(url, tok, "GET", "/api/servers/"+server, "")
	if got["status"] != "RUNNING" {
		t.Fatalf("after the crash the server is %v", got["status"])
	}
	out := call(url, tok, "POST", "/api/servers/"+server+"/sessions/s/exec", `{"command":"cat note.txt"}`)
	if out["stdout"] != "kept\n" {
		t.Fatalf("the sandbox lost its files across the crash: %v", out)
	}
	call(url, tok, "DELETE", "/api/servers/"+server, "")

	// A clean stop stops the embedded database the second server adopted.
	pidFile := filepath.Join(data, "pg", "data", "postmaster.pid")
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("the embedded database is not where expected: %v", err)
	}
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Fatalf("berth serve exited with %v after SIGTERM", err)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("the embedded database still runs after berth stopped (%v)", err)
	}
}
