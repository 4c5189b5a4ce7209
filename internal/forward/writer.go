package forward

import (
	"bufio"
	"net"
	"net/http"
)

// trackingWriter remembers whether anything reached the client, so the
// error handler never writes a second status line or writes into a
// connection that was hijacked for a WebSocket. Flush and everything else
// reach the underlying writer through Unwrap.
type trackingWriter struct {
	http.ResponseWriter
	sent     bool
	hijacked bool
	// idle, when set, does not count the time a write waits for the
	// caller against the stream's idle timeout.
	idle *Idle
}

func (w *trackingWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.sent = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(p []byte) (int, error) {
	w.sent = true
	defer w.idle.wait()()
	return w.ResponseWriter.Write(p)
}

// Hijack is defined here rather than left to Unwrap so that a hijack is
// recorded.
func (w *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return conn, brw, err
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
