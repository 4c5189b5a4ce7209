package agent

import (
	"net/http"

	"github.com/berth-mcp/berth/internal/wire"
)

func requirePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", wire.Errorf(wire.CodeBadRequest, "query parameter path is required")
	}
	return p, nil
}

func (a *Agent) listFiles() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		p := r.URL.Query().Get("path")
		if p == "" {
			p = "."
		}
		recursive, err := queryBool(r, "recursive")
		if err != nil {
			return nil, err
		}
		max, err := queryInt(r, "max_entries", 10000)
		if err != nil {
			return nil, err
		}
		return a.ws.List(r.Context(), p, recursive, int(max))
	})
}

func (a *Agent) readFile() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		p, err := requirePath(r)
		if err != nil {
			return nil, err
		}
		lines, err := queryBool(r, "lines")
		if err != nil {
			return nil, err
		}
		offset, err := queryInt(r, "offset", 0)
		if err != nil {
			return nil, err
		}
		limit, err := queryInt(r, "limit", 0)
		if err != nil {
			return nil, err
		}
		maxBytes, err := queryInt(r, "max_bytes", 0)
		if err != nil {
			return nil, err
		}
		return a.ws.ReadAtMost(r.Context(), p, offset, limit, lines, maxBytes)
	})
}

func (a *Agent) writeFile() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.WriteFileRequest) (any, error) {
		return a.ws.Write(r.Context(), req)
	})
}

func (a *Agent) mkdir() http.Handler {
	return jsonHandler(a, func(r *http.Request, req wire.MkdirRequest) (any, error) {
		return a.ws.Mkdir(r.Context(), req)
	})
}

func (a *Agent) remove() http.Handler {
	return a.handle(func(r *http.Request, _ http.ResponseWriter) (any, error) {
		p, err := requirePath(r)
		if err != nil {
			return nil, err
		}
		recursive, err := queryBool(r, "recursive")
		if err != nil {
			return nil, err
		}
		return a.ws.Remove(r.Context(), p, recursive)
	})
}

// downloadArchive streams a tar of the path. Errors found before the first
// byte get a JSON error; after that the connection is aborted, which
// readers see as a broken stream.
func (a *Agent) downloadArchive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		if p == "" {
			p = "."
		}
		if _, err := a.ws.Rel(p); err != nil {
			writeError(w, a.log, r, err)
			return
		}
		lw := &lazyWriter{w: w, header: func() {
			w.Header().Set("Content-Type", "application/x-tar")
			w.WriteHeader(http.StatusOK)
		}}
		if err := a.ws.WriteArchive(r.Context(), p, lw); err != nil {
			if !lw.started {
				writeError(w, a.log, r, err)
				return
			}
			a.log.Warn("archive download cut short", "path", p, "err", err)
			// Ending the handler normally would end the response
			// cleanly, and a tar cut at an entry boundary reads as a
			// whole, smaller archive: abort the connection instead, so
			// the reader sees the stream broken.
			panic(http.ErrAbortHandler)
		}
		if !lw.started {
			lw.header()
		}
	})
}

func (a *Agent) uploadArchive() http.Handler {
	return a.handle(func(r *http.Request, w http.ResponseWriter) (any, error) {
		p, err := requirePath(r)
		if err != nil {
			return nil, err
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxArchiveBytes+1<<20)
		return a.ws.ExtractArchive(r.Context(), p, r.Body)
	})
}

// lazyWriter sends the response header on the first write, so that an
// error found before any output can still become a JSON error answer.
type lazyWriter struct {
	w       http.ResponseWriter
	header  func()
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.header()
	}
	return l.w.Write(p)
}
