package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// Workspace archives stream both ways, so they are routes of their own
// rather than JSON operations of the catalogue (whose download_archive
// and upload_archive carry base64 for MCP).

func archiveRequest(r *http.Request) orchestrator.ArchiveRequest {
	return orchestrator.ArchiveRequest{ServerID: chi.URLParam(r, "server_id"), Path: r.URL.Query().Get("path")}
}

// ArchiveLimitHeader names, on an archive download, the most an archive
// may hold: a stream aborted after exactly that many bytes was cut for
// its size (clients such as berth cp say so), any other abort is a
// broken stream.
const ArchiveLimitHeader = "Berth-Archive-Limit"

// downloadArchive streams a tar of a workspace path. The service writes
// nothing before the agent accepted the path, so a refusal is still a
// JSON error; a failure after the first byte aborts the connection, so a
// cut archive never looks complete.
func (s *server) downloadArchive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &tarWriter{w: w, limit: s.svc.ArchiveLimit()}
		_, err := s.svc.DownloadArchive(r.Context(), principal(r), archiveRequest(r), tw)
		switch {
		case err == nil && !tw.started:
			tw.start() // an empty answer is still an answer
		case err != nil && !tw.started:
			s.fail(w, r, err)
		case err != nil:
			s.log.Warn("archive download cut", "path", r.URL.Path, "err", err)
			// What was written goes out before the abort: a cut for the
			// size must reach the client at exactly the limit, and the
			// response's buffer is not flushed by an abort.
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
	})
}

// tarWriter sends the answer's headers with its first byte.
type tarWriter struct {
	w       http.ResponseWriter
	limit   int64
	started bool
}

func (t *tarWriter) start() {
	t.started = true
	t.w.Header().Set(ArchiveLimitHeader, strconv.FormatInt(t.limit, 10))
	t.w.Header().Set("Content-Type", "application/x-tar")
	t.w.Header().Set("Content-Disposition", `attachment; filename="workspace.tar"`)
	t.w.WriteHeader(http.StatusOK)
}

func (t *tarWriter) Write(p []byte) (int, error) {
	if !t.started {
		t.start()
	}
	return t.w.Write(p)
}

// uploadArchive extracts the tar (or gzip-compressed tar) in the body;
// the service bounds its size.
func (s *server) uploadArchive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.svc.UploadArchive(r.Context(), principal(r), archiveRequest(r), r.Body)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, res)
	})
}
