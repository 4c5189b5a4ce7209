package runtimetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// serverScript serves $SECRET on 127.0.0.1:$PORT until killed, detached
// from the session that starts it.
const serverScript = `setsid python3 -c '
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(os.environ["SECRET"].encode())
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
' >/dev/null 2>&1 < /dev/null &
for i in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done`

// fetch prints what 127.0.0.1:$PORT answers, or NOTHING.
const fetch = `(exec 3<>/dev/tcp/127.0.0.1/$PORT && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null || echo NOTHING`

// attackNeighbours has alice's sandbox go after bob's: his loopback
// servers, his files, his processes, and a uid of hers that might be
// his. Items 6 and 9.
func attackNeighbours(t *testing.T, b *Berth) {
	alice := b.user(t, "alice-n").start(t, orchestrator.StartServerRequest{})
	bob := b.user(t, "bob-n").start(t, orchestrator.StartServerRequest{})

	bob.ok(t, "SECRET=bob-loopback-secret PORT=18123 bash -c "+shellQuote(serverScript))
	if got := bob.ok(t, "PORT=18123 bash -c "+shellQuote(fetch)); !strings.Contains(got, "bob-loopback-secret") {
		t.Fatalf("bob's sandbox cannot reach its own loopback server: %q", got)
	}
	if got := alice.ok(t, "PORT=18123 bash -c "+shellQuote(fetch)); strings.Contains(got, "bob-loopback-secret") {
		t.Fatalf("alice's sandbox reached bob's loopback server: %q", got)
	}

	bob.ok(t, "echo bob-file-secret > /workspace/bob-secret; echo x > /tmp/bob-secret; echo x > /dev/shm/bob-secret")
	if got := alice.sh(t, "find / -name bob-secret -not -path '/proc/*' 2>/dev/null").Stdout; got != "" {
		t.Fatalf("alice's sandbox finds bob's files: %q", got)
	}
	if got := alice.sh(t, "grep -rl bob-file-secre[t] /tmp /dev/shm /workspace /run 2>/dev/null").Stdout; got != "" {
		t.Fatalf("alice's sandbox reads bob's files: %q", got)
	}
	if got := alice.ok(t, "ps -eo args"); strings.Contains(got, "python3") {
		t.Fatalf("alice's sandbox sees bob's processes:\n%s", got)
	}

	af, an, aok := alice.hostIDs(t)
	bf, bn, bok := bob.hostIDs(t)
	if aok && bok && af < bf+bn && bf < af+an {
		t.Fatalf("alice's host uids [%d, %d) overlap bob's [%d, %d)", af, af+an, bf, bf+bn)
	}

	// Killing everything it can see ends only alice's own sandbox.
	alice.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL -1"})
	if got := bob.ok(t, "PORT=18123 bash -c "+shellQuote(fetch)); !strings.Contains(got, "bob-loopback-secret") {
		t.Fatalf("alice's kill -1 reached bob's sandbox: %q", got)
	}
}

// attackHost reads and writes what it can of the host. Items 9 and 16.
func attackHost(t *testing.T, b *Berth) {
	sb := b.user(t, "host-prober").start(t, orchestrator.StartServerRequest{})
	if first, _, ok := sb.hostIDs(t); ok && first == 0 {
		t.Fatal("the sandbox's root is the host's root")
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	writes := []string{"touch /usr/bin/berth-was-here", "echo x >> /etc/passwd", "touch /etc/berth-was-here", "mkdir /berth-was-here"}
	for _, cmd := range writes {
		// An image's root is the sandbox's own to write (into its upper):
		// the writes must stay there.
		res := sb.sh(t, cmd)
		switch {
		case res.ExitCode == 0 && !b.WritableRoot:
			t.Errorf("the sandbox could %q: %s", cmd, res.Stdout)
		case res.ExitCode != 0 && b.WritableRoot:
			t.Errorf("the sandbox could not %q in its own root: %s", cmd, res.Stderr)
		}
	}
	for _, cmd := range []string{
		"cat /etc/shadow", "mount -t tmpfs none /mnt",
		"unshare -U true", "unshare -m true", "mknod /tmp/sda b 8 0 && head -c1 /tmp/sda",
	} {
		if res := sb.sh(t, cmd); res.ExitCode == 0 {
			t.Errorf("the sandbox could %q: %s", cmd, res.Stdout)
		}
	}
	for _, f := range []string{"/usr/bin/berth-was-here", "/etc/berth-was-here", "/berth-was-here"} {
		if _, err := os.Lstat(f); err == nil {
			t.Fatalf("the sandbox created %s on the host", f)
		}
	}
	if now, _ := os.ReadFile("/etc/passwd"); string(now) != string(passwd) {
		t.Fatal("the sandbox changed the host's /etc/passwd")
	}
	if b.WritableRoot {
		// Another sandbox of the same image starts from the image as it
		// was, not as this one changed it.
		other := b.user(t, "host-prober-2").start(t, orchestrator.StartServerRequest{})
		if got := other.sh(t, "ls -d /usr/bin/berth-was-here /etc/berth-was-here /berth-was-here 2>/dev/null; grep -c '^x$' /etc/passwd").Stdout; got != "0\n" {
			t.Fatalf("a sandbox of the same image sees another's writes to its root: %q", got)
		}
	}
	// Private /tmp and /dev/shm (but for the agent's own session files);
	// no home directories, no /var, no /srv of the host's: marked here,
	// looked for inside.
	if got := strings.TrimSpace(sb.ok(t, "ls -A /tmp /dev/shm | grep -v :$ | grep -v ^$ | grep -v ^berth-session- || true")); got != "" {
		t.Fatalf("the sandbox's /tmp or /dev/shm holds %q: the host's?", got)
	}
	marker := plantMarkers(t, "/tmp", "/dev/shm", "/root", "/home", "/srv", "/var/lib", "/var/tmp", "/mnt")
	if got := strings.TrimSpace(sb.sh(t, "find / -name '"+marker+"*' -not -path '/proc/*' 2>/dev/null").Stdout); got != "" {
		t.Fatalf("the sandbox sees the host's files: %q", got)
	}
	if !b.ImageRoot {
		// The local runtime shows the host's /usr, /bin, /lib and /etc
		// and nothing else of the host's.
		if got := strings.TrimSpace(sb.ok(t, "ls -d /root /home /srv /var/lib /work /mnt 2>/dev/null || true")); got != "" {
			t.Fatalf("the sandbox sees host directories: %q", got)
		}
	}
	if got := sb.ok(t, "ls /proc | grep -c '^[0-9]'"); atoi(got) > 20 {
		t.Fatalf("the sandbox sees %s processes: the host's?", strings.TrimSpace(got))
	}
}

// attackAgentSocket looks for the socket berth reaches the agent through,
// to move it away and answer in the agent's place. Item 7.
func attackAgentSocket(t *testing.T, b *Berth) {
	sb := b.user(t, "impostor").start(t, orchestrator.StartServerRequest{})
	if got := strings.TrimSpace(sb.sh(t, "find / -type s -not -path '/proc/*' 2>/dev/null").Stdout); got != "" {
		t.Fatalf("the sandbox sees unix sockets: %q", got)
	}
	sb.sh(t, `python3 -c '
import socket, os
for p in ["/workspace/../agent.sock", "/run/agent.sock", "/tmp/agent.sock", "agent.sock"]:
    try:
        s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen()
    except OSError: pass
' ; true`)
	// berth still reaches the sandbox's real agent.
	if got := sb.ok(t, "echo real-agent"); got != "real-agent\n" {
		t.Fatalf("after the socket attack berth got %q", got)
	}
}

// plantMarkers puts a file with a fresh name in each host directory that
// exists, removed when t ends, and returns the name's prefix.
func plantMarkers(t *testing.T, dirs ...string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	prefix := "berth-attack-marker-" + hex.EncodeToString(b)
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		p := filepath.Join(d, prefix)
		if err := os.WriteFile(p, []byte("host\n"), 0o644); err != nil {
			t.Fatalf("marker %s: %v", p, err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	return prefix
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func atoi(s string) int {
	var n int
	fmt.Sscan(strings.TrimSpace(s), &n)
	return n
}
