package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// containerLogs keeps one file per attempt of a container, as a kubelet
// keeps the current and the previous one.
type containerLogs struct {
	dir string
	mu  sync.Mutex
	cur *logWriter
}

func newContainerLogs(podDir, name string) *containerLogs {
	return &containerLogs{dir: filepath.Join(podDir, "logs", name)}
}

func (l *containerLogs) path(attempt int) string {
	return filepath.Join(l.dir, strconv.Itoa(attempt)+".log")
}

// lastWords is the end of an attempt's log as a kubelet makes a
// termination message from it (FallbackToLogsOnError): the last 80
// lines, at most 2048 bytes.
func (l *containerLogs) lastWords(attempt int) string {
	b, err := os.ReadFile(l.path(attempt))
	if err != nil {
		return ""
	}
	b = tailLines(b, 80)
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// open starts the log of an attempt.
func (l *containerLogs) open(attempt int) (*logWriter, error) {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("container log: %w", err)
	}
	f, err := os.OpenFile(l.path(attempt), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("container log: %w", err)
	}
	w := &logWriter{f: f, attempt: attempt, wrote: make(chan struct{}), closed: make(chan struct{})}
	l.mu.Lock()
	l.cur = w
	l.mu.Unlock()
	return w, nil
}

func (l *containerLogs) current() *logWriter {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// logWriter appends a process's output to its attempt's file and wakes
// followers of the log on each write.
type logWriter struct {
	mu      sync.Mutex
	f       *os.File
	attempt int
	wrote   chan struct{} // closed and replaced on each write
	closed  chan struct{} // closed when the attempt ended
	once    sync.Once
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.f.Write(p)
	close(w.wrote)
	w.wrote = make(chan struct{})
	return n, err
}

// changed returns a channel closed at the next write.
func (w *logWriter) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrote
}

// finish closes the file when the attempt ended.
func (w *logWriter) finish() {
	w.once.Do(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.f.Close()
		close(w.closed)
	})
}

// logServer is the kubelet's HTTPS endpoint that kube-apiserver proxies
// pods/log to (the node's kubeletEndpoint port on its InternalIP). Like a
// kubelet it serves only clients with a certificate from the cluster CA.
type logServer struct {
	k    *Kubelet
	port int
	srv  *http.Server
	done chan struct{}
}

func startLogServer(k *Kubelet) (*logServer, error) {
	cert, err := tls.LoadX509KeyPair(k.cfg.pki.ServeCert, k.cfg.pki.ServeKey)
	if err != nil {
		return nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.cfg.pki.caPEM)
	l, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		return nil, fmt.Errorf("kubelet listener: %w", err)
	}
	s := &logServer{k: k, port: l.Addr().(*net.TCPAddr).Port, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	s.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return k.ctx },
		ErrorLog:          k.log,
	}
	go func() {
		defer close(s.done)
		if err := s.srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			k.logf("kubelet server: %v", err)
		}
	}()
	return s, nil
}

func (s *logServer) close() {
	_ = s.srv.Close()
	<-s.done
}

// containerLogs serves a container's log with the query parameters of
// pods/log that kube-apiserver passes on: previous, tailLines, limitBytes
// and follow (until the attempt ends). timestamps and sinceSeconds are
// not supported: the files keep no times.
func (s *logServer) containerLogs(rw http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	w := s.k.worker(ns, name)
	if w == nil {
		http.Error(rw, fmt.Sprintf("pod %s/%s not found on this kubelet", ns, name), http.StatusNotFound)
		return
	}
	c := w.containerNamed(cname)
	if c == nil {
		http.Error(rw, fmt.Sprintf("container %s is not valid for pod %s", cname, name), http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	cur := c.logs.current()
	if cur == nil {
		w.mu.Lock()
		reason := "ContainerCreating"
		if wt := c.status.State.Waiting; wt != nil {
			reason = wt.Reason
		}
		w.mu.Unlock()
		http.Error(rw, fmt.Sprintf("container %q in pod %q is waiting to start: %s", cname, name, reason), http.StatusBadRequest)
		return
	}
	attempt := cur.attempt
	if q.Get("previous") == "true" {
		if attempt == 0 {
			http.Error(rw, fmt.Sprintf("previous terminated container %q in pod %q not found", cname, name), http.StatusBadRequest)
			return
		}
		attempt--
		cur = nil
	}
	full, err := os.ReadFile(c.logs.path(attempt))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	data := full
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
		data = tailLines(data, n)
	}
	limit := int64(-1)
	if n, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && n > 0 {
		limit = n
	}
	rw.Header().Set("Content-Type", "text/plain")
	writeLimited(rw, data, &limit)
	if q.Get("follow") != "true" || cur == nil || limit == 0 {
		return
	}
	s.follow(r.Context(), rw, c.logs.path(attempt), int64(len(full)), cur, &limit)
}

// follow streams what the attempt writes after offset until it ends, the
// client goes or limit is spent.
func (s *logServer) follow(ctx context.Context, rw http.ResponseWriter, path string, offset int64, lw *logWriter, limit *int64) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	fl, _ := rw.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		changed := lw.changed()
		for {
			n, err := f.Read(buf)
			if n > 0 {
				writeLimited(rw, buf[:n], limit)
				if fl != nil {
					fl.Flush()
				}
				if *limit == 0 {
					return
				}
			}
			if err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-lw.closed:
			// Drain what came with the end, then stop.
			if b, err := io.ReadAll(f); err == nil {
				writeLimited(rw, b, limit)
			}
			return
		case <-changed:
		}
	}
}

// writeLimited writes at most *limit bytes of b (all when negative) and
// lowers *limit by what it wrote.
func writeLimited(w io.Writer, b []byte, limit *int64) int {
	if *limit >= 0 && int64(len(b)) > *limit {
		b = b[:*limit]
	}
	n, _ := w.Write(b)
	if *limit >= 0 {
		*limit -= int64(n)
	}
	return n
}

// tailLines keeps the last n lines of b.
func tailLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	i := end
	for ; n > 0 && i >= 0; n-- {
		i = bytes.LastIndexByte(b[:i], '\n')
		if i < 0 {
			return b
		}
	}
	return b[i+1:]
}
