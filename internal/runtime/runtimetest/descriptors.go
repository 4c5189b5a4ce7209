package runtimetest

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// listDescriptors lists the lister's own open descriptors with their
// targets.
const listDescriptors = "ls -l /proc/self/fd/"

// listerDir is the target of the descriptor ls reads /proc/self/fd with.
var listerDir = regexp.MustCompile(`^/proc/[0-9]+/fd/?$`)

// attackDescriptors looks from inside at what commands hold open: a
// one-shot command, a command of the persistent session and one run as
// nobody must have their stdio and nothing else (the directory ls lists
// aside), and every descriptor of the agent above its stdio must be
// close-on-exec. A descriptor passed on by mistake is a way in: the
// agent's listening socket let any user of a sandbox accept berth's calls
// and answer in the agent's place, and a pipe berth inherited from
// whoever started it reached every sandbox. The runtime's test leaks a
// descriptor into berth's own process before this runs, so that a leak
// would show. Issue 18 item 7.
func attackDescriptors(t *testing.T, b *Berth) {
	sb := b.user(t, "fdlister").start(t, orchestrator.StartServerRequest{})
	// The agent first, through a one-shot command, whose parent it is: a
	// command as another user makes the agent undumpable (Go forks with
	// vfork, and the child's setuid marks the memory it shares with the
	// agent), and the sandbox's root can no longer look at it.
	op, err := sb.oneShot(orchestrator.RunBashRequest{Command: `tr '\0' ' ' < /proc/$PPID/cmdline; echo; ` +
		`for f in /proc/$PPID/fdinfo/*; do printf '%s ' "${f##*/}"; grep '^flags:' "$f"; done`})
	if err != nil {
		t.Fatal(err)
	}
	out := bashOutput(t, op)
	cmdline, infos, _ := strings.Cut(out, "\n")
	if !strings.Contains(cmdline, "berth-agent") {
		t.Fatalf("the one-shot command's parent is %q, not the agent", cmdline)
	}
	n := 0
	for line := range strings.Lines(infos) {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "flags:" {
			t.Fatalf("fdinfo of the agent: %q in\n%s", line, out)
		}
		fd, _ := strconv.Atoi(f[0])
		flags, err := strconv.ParseUint(f[2], 8, 64)
		if err != nil {
			t.Fatalf("fdinfo of the agent: %q: %v", line, err)
		}
		n++
		// O_CLOEXEC, as fdinfo shows it.
		if fd > 2 && flags&0o2000000 == 0 {
			t.Errorf("the agent's descriptor %d is not close-on-exec (flags %s): every command would inherit it\n%s", fd, f[2], out)
		}
	}
	if n < 4 {
		t.Fatalf("read %d descriptors of the agent, want its stdio and more:\n%s", n, out)
	}
	onlyStdio(t, "a session command", sb.ok(t, listDescriptors))
	users := []string{"", "nobody"}
	if b.OneUser {
		users = users[:1]
	}
	for _, user := range users {
		op, err := sb.oneShot(orchestrator.RunBashRequest{Command: listDescriptors, User: user})
		if err != nil {
			t.Fatalf("run %q as %q: %v", listDescriptors, user, err)
		}
		onlyStdio(t, "a one-shot command as "+orDefault(user, "the default user"), bashOutput(t, op))
	}
}

// onlyStdio fails unless the ls -l listing of a process's descriptors
// holds 0, 1 and 2 and the directory ls reads.
func onlyStdio(t *testing.T, what, listing string) {
	t.Helper()
	seen := 0
	for line := range strings.Lines(listing) {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue // "total 0"
		}
		fd, target := f[len(f)-3], f[len(f)-1]
		switch {
		case fd == "0" || fd == "1" || fd == "2":
			seen++
		case listerDir.MatchString(target):
		default:
			t.Errorf("%s has descriptor %s open (-> %s):\n%s", what, fd, target, listing)
		}
	}
	if seen != 3 {
		t.Errorf("%s: want descriptors 0, 1 and 2 in its listing:\n%s", what, listing)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
