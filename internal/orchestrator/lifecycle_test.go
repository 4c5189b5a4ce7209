package orchestrator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// secret is an env value that must never be stored in clear.
const secret = "hunter2"

// TestLifecycle walks one server through its life with a real agent and
// real bash, then checks what the audit log and the database kept.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")

	c := registerClient(t, h.Svc, alice, "run-1")
	if c.Status != orchestrator.ClientAlive || c.Namespace != "default" || c.OwnerID != alice.UserID {
		t.Fatalf("client %+v", c)
	}
	op, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{
		ClientID: c.ID, ImageTag: "img", ServerName: "main",
		Env: map[string]string{"SECRET": secret}, WaitSeconds: deadline.Seconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if op.Type != "start_server" || op.ServerID == "" {
		t.Fatalf("operation %+v", op)
	}
	res := startResult(t, op)
	if res.ServerID != op.ServerID || res.ClientID != c.ID || res.Warm || res.Reused != "" {
		t.Fatalf("start result %+v", res)
	}
	srv, err := h.Svc.GetServer(ctx, alice, res.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Status != orchestrator.ServerRunning || srv.ServerName != "main" || !slices.Equal(srv.EnvKeys, []string{"SECRET"}) {
		t.Fatalf("server %+v", srv)
	}
	if st, err := h.Runtime.Status(ctx, srv.ID); err != nil || st.State != "ready" {
		t.Fatalf("sandbox status %+v %v", st, err)
	}

	if got := bash(t, h.Svc, alice, srv.ID, "echo hello", nil); got.Stdout != "hello\n" || got.ExitCode != 0 {
		t.Fatalf("echo hello: %+v", got)
	}
	// The sandbox's env holds the secret (compared by digest, so the
	// command's output does not store it either).
	sum := sha256.Sum256([]byte(secret))
	if got := bash(t, h.Svc, alice, srv.ID, `printf %s "$SECRET" | sha256sum | cut -d' ' -f1`, nil); strings.TrimSpace(got.Stdout) != hex.EncodeToString(sum[:]) {
		t.Fatalf("SECRET in the sandbox: digest %q", got.Stdout)
	}
	// A command's env reaches the command and is not stored in clear.
	if got := bash(t, h.Svc, alice, srv.ID, `printf %s "$CMD_TOKEN" | wc -c`, map[string]string{"CMD_TOKEN": secret + "-cmd"}); strings.TrimSpace(got.Stdout) != "11" {
		t.Fatalf("command env: %+v", got)
	}
	if got := bash(t, h.Svc, alice, srv.ID, "exit 3", nil); got.ExitCode != 3 {
		t.Fatalf("exit 3: %+v", got)
	}

	sessionExec(t, h.Svc, alice, srv.ID, "work", "mkdir -p sub && cd sub && export GREETING=hi")
	if got := sessionExec(t, h.Svc, alice, srv.ID, "work", `pwd; echo "$GREETING"`); !strings.HasSuffix(got.Stdout, "/sub\nhi\n") {
		t.Fatalf("session kept no state: %q", got.Stdout)
	}
	if got := sessionExec(t, h.Svc, alice, srv.ID, "other", `echo "${GREETING:-unset}"`); got.Stdout != "unset\n" {
		t.Fatalf("sessions share state: %q", got.Stdout)
	}

	fin, err := h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ClientID: c.ID, ServerID: srv.ID})
	if err != nil || fin.Status != orchestrator.ServerFinished || fin.FinishedAt == nil {
		t.Fatalf("finish: %+v %v", fin, err)
	}
	stopped, err := h.Svc.StopServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ID})
	if err != nil || stopped.Status != orchestrator.ServerStopped {
		t.Fatalf("stop: %+v %v", stopped, err)
	}
	if gone, err := sandboxGone(ctx, h.Runtime, srv.ID); err != nil || !gone {
		t.Fatalf("sandbox still there after stop (%v)", err)
	}
	if _, err := h.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{ServerID: srv.ID, Command: "true"}); err == nil {
		t.Fatal("bash on a stopped server was accepted")
	}

	t.Run("audit", func(t *testing.T) {
		entries, err := h.Store.ListAudit(ctx, store.AuditFilter{ActorID: alice.UserID, Limit: store.MaxAuditLimit})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if e.Outcome == store.OutcomeOK {
				seen[e.Action] = true
			}
			b, _ := json.Marshal(e)
			if strings.Contains(string(b), secret) {
				t.Errorf("audit entry holds an env value: %s", b)
			}
		}
		for _, a := range []string{"client.register", "server.start", "server.exec", "server.finish", "server.stop"} {
			if !seen[a] {
				t.Errorf("no ok audit entry for %s (have %v)", a, seen)
			}
		}
	})
	t.Run("no secret in clear", func(t *testing.T) {
		assertNoClearText(t, h.Store, secret, "servers.env_sealed", "operations.params_sealed")
	})
}

// assertNoClearText dumps every table of berth's schema as text, and the
// sealed columns (table.column, each of which must hold a value) as raw
// bytes, and fails if needle shows up.
func assertNoClearText(t *testing.T, st *store.Store, needle string, sealed ...string) {
	t.Helper()
	ctx := context.Background()
	rows, err := st.Pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, table := range []string{"servers", "operations", "audit_log"} {
		if !slices.Contains(tables, table) {
			t.Fatalf("table %s missing from %v", table, tables)
		}
	}
	for _, table := range tables {
		rows, err := st.Pool.Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var text string
			if err := rows.Scan(&text); err != nil {
				t.Fatal(err)
			}
			n++
			if strings.Contains(text, needle) {
				t.Errorf("table %s holds %q in clear: %s", table, needle, text)
			}
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if (table == "servers" || table == "operations") && n == 0 {
			t.Errorf("table %s is empty: the dump checks nothing", table)
		}
	}
	// row_to_json shows bytea as hex; look at the raw bytes too.
	for _, col := range sealed {
		table, column, _ := strings.Cut(col, ".")
		q := fmt.Sprintf(`SELECT %s FROM %s WHERE %[1]s IS NOT NULL`, column, table)
		rows, err := st.Pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var b []byte
			rows.Scan(&b)
			n++
			if bytes.Contains(b, []byte(needle)) {
				t.Errorf("%s: sealed value holds %q in clear", q, needle)
			}
		}
		if n == 0 {
			t.Errorf("%s: no row; the test sealed nothing there", q)
		}
	}
}

// TestReuse hands a finished server out again: RESET keeps its files and
// ends its shells, RESTART gives a fresh filesystem; both keep its id.
func TestReuse(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "reuse")
	req := orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "keep", Env: map[string]string{"V": "first"}}

	first := startServer(t, h.Svc, alice, req)
	id := first.ServerID
	sessionExec(t, h.Svc, alice, id, "default", "echo data > kept.txt; export MARK=set")
	if _, err := h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ServerID: id}); err != nil {
		t.Fatal(err)
	}
	// A finished server takes no commands.
	if _, err := h.Svc.SessionExec(ctx, alice, id, "default", wireExec("true")); err == nil {
		t.Fatal("exec on a finished server was accepted")
	}

	// RESET keeps the sandbox, so the env it was started with: the
	// record must say so whatever this request asked.
	req.ReuseStrategy = "RESET"
	req.Env = map[string]string{"W": "second"}
	reset := startServer(t, h.Svc, alice, req)
	if reset.ServerID != id || reset.Reused != orchestrator.ReuseReset {
		t.Fatalf("RESET: got server %s reused %q, want %s reused RESET", reset.ServerID, reset.Reused, id)
	}
	if got := sessionExec(t, h.Svc, alice, id, "default", `cat kept.txt; echo "${MARK:-unset}"; echo "$V/${W:-none}"`); got.Stdout != "data\nunset\nfirst/none\n" {
		t.Fatalf("after RESET: %q, want the file kept, the session ended and the first env", got.Stdout)
	}
	if got, err := h.Svc.GetServer(ctx, alice, id); err != nil || !slices.Equal(got.EnvKeys, []string{"V"}) {
		t.Fatalf("after RESET the server says env %v (%v), its sandbox has [V]", got.EnvKeys, err)
	}
	// A different name is another server.
	other := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "else", ReuseStrategy: "RESET"})
	if other.ServerID == id || other.Reused != "" {
		t.Fatalf("a server of another name was reused: %+v", other)
	}

	if _, err := h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ServerID: id}); err != nil {
		t.Fatal(err)
	}
	req.ReuseStrategy = "RESTART"
	restart := startServer(t, h.Svc, alice, req)
	if restart.ServerID != id || restart.Reused != orchestrator.ReuseRestart {
		t.Fatalf("RESTART: got server %s reused %q, want %s reused RESTART", restart.ServerID, restart.Reused, id)
	}
	if got := bash(t, h.Svc, alice, id, "ls -A", nil); got.Stdout != "" {
		t.Fatalf("after RESTART the workspace holds %q, want it empty", got.Stdout)
	}
	if got := bash(t, h.Svc, alice, id, `echo "${V:-none}/$W"`, nil); got.Stdout != "none/second\n" {
		t.Fatalf("after RESTART the env is %q, want the RESTART request's", got.Stdout)
	}

	// Without reuse a running server is never handed out twice.
	fresh := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "keep", ReuseStrategy: "RESET"})
	if fresh.ServerID == id {
		t.Fatal("a running server was handed out again")
	}
}

// TestRestartServer: a restart gives the same server a fresh filesystem;
// a server that cannot restart is refused without scheduling anything.
func TestRestartServer(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "restart")
	srv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	sessionExec(t, h.Svc, alice, srv.ServerID, "", "echo x > old.txt")

	op, err := h.Svc.RestartServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	res := startResult(t, op)
	if res.ServerID != srv.ServerID || res.Reused != orchestrator.ReuseRestart {
		t.Fatalf("restart result %+v", res)
	}
	if got := bash(t, h.Svc, alice, srv.ServerID, "ls -A; echo end", nil); got.Stdout != "end\n" {
		t.Fatalf("after restart: %q, want an empty workspace", got.Stdout)
	}

	if _, err := h.Svc.StopServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.RestartServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}, deadline.Seconds())
	wantCode(t, err, wire.CodeConflict, "STOPPED")
	ops, err := h.Store.ListOperations(ctx, srv.ServerID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if o.Status != orchestrator.OpSucceeded {
			t.Fatalf("a refused restart left operation %+v", o)
		}
	}
	if len(ops) != 4 { // start, restart, the bash command and the stop
		t.Fatalf("%d operations, want 4: %+v", len(ops), ops)
	}
	if gone, err := sandboxGone(ctx, h.Runtime, srv.ServerID); err != nil || !gone {
		t.Fatalf("stopped server has a sandbox again (%v)", err)
	}
}
