package observe

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// RequestIDHeader carries a request's id: a caller's, when it sent a safe
// one, or one berth made; the response always has it.
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds a caller's request id: longer ones are replaced.
const maxRequestID = 128

// Request is what one HTTP request was, filled in while it is served:
// the layers that learn the caller (auth) and the tool (mcpserver) set
// them through RequestFrom.
type Request struct {
	Method string
	// Route is the chi route pattern that matched ("" when none did):
	// never the raw path, which holds ids.
	Route     string
	Status    int
	Duration  time.Duration
	RequestID string

	mu     sync.Mutex
	userID string
	tool   string
}

type requestKey struct{}

// RequestFrom returns the request being observed, or nil; its setters
// accept nil.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// SetUser records the authenticated caller's user id.
func (r *Request) SetUser(id string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.userID = id
	r.mu.Unlock()
}

// SetTool records the MCP tool the request called (tools run on the
// SDK's goroutines, hence the lock).
func (r *Request) SetTool(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.tool = name
	r.mu.Unlock()
}

// User is the caller's user id, "" when none authenticated.
func (r *Request) User() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.userID
}

// Tool is the MCP tool called, "" when none.
func (r *Request) Tool() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tool
}

// HTTPObserver sees a request before it is served (it may return the
// request with a new context, a span's) and returns what to call once it
// was served (nil for nothing).
type HTTPObserver func(r *http.Request) (*http.Request, func(*Request))

// Middleware observes every request with the observers, ending them in
// reverse order. It must run inside a chi router (its r.Use), whose
// route context names the pattern once the request was routed. It sets
// X-Request-Id on every response.
func Middleware(observers ...HTTPObserver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			info := &Request{Method: r.Method, RequestID: requestID(r.Header.Get(RequestIDHeader))}
			w.Header().Set(RequestIDHeader, info.RequestID)
			r = r.WithContext(context.WithValue(r.Context(), requestKey{}, info))
			var endsBuf [4]func(*Request)
			ends := endsBuf[:0]
			for _, o := range observers {
				var end func(*Request)
				if r, end = o(r); end != nil {
					ends = append(ends, end)
				}
			}
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			info.Status = sw.status
			if info.Status == 0 {
				info.Status = http.StatusOK
			}
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				info.Route = rctx.RoutePattern()
			}
			info.Duration = time.Since(start)
			for i := len(ends) - 1; i >= 0; i-- {
				ends[i](info)
			}
		})
	}
}

// requestID returns the caller's id when it is short and made of safe
// characters (it reaches logs and traces), else a new random one.
func requestID(v string) string {
	if v != "" && len(v) <= maxRequestID && safeID(v) {
		return v
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func safeID(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// statusWriter remembers the status written; flushing (event streams)
// and hijacking (WebSockets) reach the writer underneath.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
