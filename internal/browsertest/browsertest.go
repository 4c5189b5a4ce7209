// Package browsertest runs a real headless Chromium for tests and drives
// it over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
// messages ended by a NUL byte, commands on the browser's fd 3, answers
// on its fd 4), so no WebSocket client and no npm package are needed.
// Chromium is the Debian package (`apt-get install chromium`, which
// `make test` does when it is missing); a test that needs it fails, with
// that hint, when it is not there.
package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Browser is one running Chromium with a fresh profile.
type Browser struct {
	cmd  *exec.Cmd
	in   io.WriteCloser // the browser's fd 3
	done chan struct{}  // closed when the reader ends

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan message
	readErr error
}

type message struct {
	ID     int64           `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Path returns the Chromium binary, failing t when there is none.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: the browser tests need it (apt-get install -y chromium; `make test` installs it)")
	return ""
}

// Start launches Chromium; it is killed, with its whole process group,
// when t ends.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin := Path(t)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ansR, ansW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, ansW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	cmdR.Close()
	ansW.Close()
	b := &Browser{cmd: cmd, in: cmdW, done: make(chan struct{}), waiting: map[int64]chan message{}}
	go b.read(ansR)
	t.Cleanup(func() {
		cmdW.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		<-b.done
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	return b
}

// read dispatches answers to their callers until the pipe closes. Events
// are not needed by the tests and are dropped.
func (b *Browser) read(r io.ReadCloser) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReader(r)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil || m.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	b.mu.Lock()
	b.readErr = fmt.Errorf("chromium closed its DevTools pipe: %w", err)
	for id, ch := range b.waiting {
		close(ch)
		delete(b.waiting, id)
	}
	b.mu.Unlock()
}

// call sends one DevTools command (to a page when session is set) and
// decodes its result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return b.readErr
	}
	b.nextID++
	id := b.nextID
	ch := make(chan message, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("%s: %w", method, b.readErr)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out == nil {
			return nil
		}
		return json.Unmarshal(m.Result, out)
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Page is one open tab.
type Page struct {
	b       *Browser
	session string
}

// Open opens url in a new tab and waits until its document has loaded.
func (b *Browser) Open(ctx context.Context, url string) (*Page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: attached.SessionID}
	if err := b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		return nil, err
	}
	// The navigation's document replaces about:blank some time after
	// Page.navigate answers: wait for it, not for a fixed time.
	for {
		var here struct{ Href, State string }
		err := p.Eval(ctx, `({href: location.href, state: document.readyState})`, &here)
		if err == nil && here.Href == url && here.State == "complete" {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open %s: the page did not load (at %q, %s; last error %v): %w", url, here.Href, here.State, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Eval evaluates a JavaScript expression in the page, awaiting it when it
// is a promise, and decodes its JSON value into out. A thrown exception is
// an error.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true,
	}, &res)
	if err != nil {
		return err
	}
	if d := res.ExceptionDetails; d != nil {
		return errors.New("javascript: " + d.Text + " " + d.Exception.Description)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// lockedBuffer collects the browser's stderr for a failing test's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 1<<20 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
