package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Tar archives of workspace paths, both ways. The streaming methods are
// for adapters that stream (REST): berth copies through one fixed buffer
// and never holds an archive, so its memory does not depend on what a
// sandbox sends. The inline ones carry an archive whole as base64 (MCP,
// whose values are JSON) and are bounded by Config.MaxInlineArchiveBytes.
//
// What is inside the workspace is the agent's to decide (it resolves every
// name through os.Root): a path out of the workspace, ../ entries,
// absolute names and links pointing out are refused there. berth checks
// what it can without the sandbox: sizes, and that an upload is a tar at
// all, before any byte of it reaches the sandbox.

// Archive limits by default.
const (
	DefaultMaxArchiveBytes       = 256 << 20
	DefaultMaxInlineArchiveBytes = 8 << 20
)

// tarBlock is the size of a tar header.
const tarBlock = 512

// archiveCopyBuffer is the one buffer a streamed archive goes through.
const archiveCopyBuffer = 32 << 10

// ArchiveRequest names a workspace path to archive or to extract into.
type ArchiveRequest struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Path     string `json:"path,omitempty" jsonschema:"directory or file relative to the workspace (default .): what to archive, or the directory to extract into (created when missing)"`
}

// UploadArchiveRequest extracts an archive given whole, as base64, into a
// workspace directory.
type UploadArchiveRequest struct {
	ServerID      string `json:"server_id" jsonschema:"the server"`
	Path          string `json:"path,omitempty" jsonschema:"directory relative to the workspace to extract into, created when missing (default .)"`
	ArchiveBase64 string `json:"archive_base64" jsonschema:"the tar archive (optionally gzip-compressed) in standard base64; at most 8 MiB decoded unless the operator set another limit"`
}

// ArchiveResult is what an extracted archive wrote.
type ArchiveResult struct {
	Path  string `json:"path" jsonschema:"the workspace-relative directory the archive was extracted into"`
	Bytes int64  `json:"bytes" jsonschema:"bytes of file data extracted"`
}

// ArchiveContent is an archive returned whole.
type ArchiveContent struct {
	Path          string `json:"path" jsonschema:"the workspace-relative path that was archived"`
	Bytes         int64  `json:"bytes" jsonschema:"size of the tar archive in bytes"`
	ArchiveBase64 string `json:"archive_base64" jsonschema:"the tar archive in standard base64: a directory's entries are named relative to it, a file by its base name; symlinks are stored as links"`
}

func archivePath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func archiveQuery(p string) string {
	return "api/fs/archive?" + url.Values{"path": {archivePath(p)}}.Encode()
}

// archiveStream is an agent's answer to an archive download, the tar
// stream unread, bounded by the idle timeout; Close ends both.
type archiveStream struct {
	srv  store.Server
	ctx  context.Context
	idle *forward.Idle
	resp *http.Response
	stop context.CancelFunc
}

func (a archiveStream) Close() {
	a.resp.Body.Close()
	a.stop()
}

// openArchive asks a server's agent for an archive and returns its answer
// with the tar stream unread, once the agent accepted the path.
func (s *Service) openArchive(ctx context.Context, p rbac.Principal, req ArchiveRequest) (archiveStream, error) {
	srv, err := s.execServer(ctx, p, req.ServerID)
	if err != nil {
		return archiveStream{}, err
	}
	t, err := s.target(ctx, srv)
	if err != nil {
		return archiveStream{}, err
	}
	ctx, idle, stop := s.stream(ctx, srv.ID, "the archive download")
	resp, err := s.sendAgent(ctx, t, http.MethodGet, archiveQuery(req.Path), nil, nil)
	if err != nil {
		stop()
		return archiveStream{}, fmt.Errorf("archive %s: %w", archivePath(req.Path), err)
	}
	resp.Body = idle.AgentBody(resp.Body)
	s.touch(ctx, srv)
	return archiveStream{srv: srv, ctx: ctx, idle: idle, resp: resp, stop: stop}, nil
}

// DownloadArchive streams a tar archive of a workspace path to w and
// returns its size. Nothing is written to w before the agent has accepted
// the path, so an adapter that sends its headers on the first write can
// still answer an error; an error after that (too large, the sandbox
// stopped mid-way or sent nothing for the idle timeout) means the stream
// was cut, and w holds a truncated archive. At most
// Config.MaxArchiveBytes are copied.
func (s *Service) DownloadArchive(ctx context.Context, p rbac.Principal, req ArchiveRequest, w io.Writer) (int64, error) {
	a, err := s.openArchive(ctx, p, req)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	n, err := copyArchive(a.idle.CallerWriter(w), a.resp.Body, s.cfg.MaxArchiveBytes, a.srv.ID, archivePath(req.Path))
	if err != nil {
		err = forward.CutOr(a.ctx, err)
	}
	return n, err
}

// copyArchive copies at most limit bytes of an agent's archive from r to
// w through one buffer; a stream going on past limit is cut there with a
// too_large error, whatever the sandbox would still send. Exactly limit
// bytes go out before the cut, so a client that knows the limit
// (ArchiveLimit) can tell a cut at the limit from a broken stream.
func copyArchive(w io.Writer, r io.Reader, limit int64, serverID, path string) (int64, error) {
	buf := make([]byte, archiveCopyBuffer)
	var n int64
	for {
		k, rerr := r.Read(buf)
		over := n+int64(k) > limit
		if over {
			k = int(limit - n)
		}
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("send archive of %s on server %s: %w", path, serverID, err)
			}
			n += int64(k)
		}
		switch {
		case over:
			return n, archiveTooLarge(path, limit, "--max-archive-bytes")
		case errors.Is(rerr, io.EOF):
			return n, nil
		case rerr != nil:
			return n, wire.Errorf(wire.CodeBadGateway, "archive of %s from server %s cut short after %d bytes: %v", path, serverID, n, rerr)
		}
	}
}

// ArchiveLimit is the most a streamed archive may hold (the operator's
// --max-archive-bytes): a download cut at exactly this many bytes was cut
// for its size.
func (s *Service) ArchiveLimit() int64 { return s.cfg.MaxArchiveBytes }

func archiveTooLarge(path string, limit int64, flag string) error {
	return wire.Errorf(wire.CodeTooLarge, "archive of %s: more than the %d bytes berth allows (%s); archive a smaller path", path, limit, flag)
}

// DownloadArchiveInline returns a tar archive of a workspace path whole,
// as base64, for callers that cannot stream; it is bounded by
// Config.MaxInlineArchiveBytes and held in memory against the answer
// budget while it is read.
func (s *Service) DownloadArchiveInline(ctx context.Context, p rbac.Principal, req ArchiveRequest) (ArchiveContent, error) {
	a, err := s.openArchive(ctx, p, req)
	if err != nil {
		return ArchiveContent{}, err
	}
	defer a.Close()
	path := archivePath(req.Path)
	raw, err := s.readAnswer(a.ctx, a.srv.ID, a.resp, s.cfg.MaxInlineArchiveBytes)
	if errors.Is(err, forward.ErrAnswerTooLarge) {
		return ArchiveContent{}, wire.Errorf(wire.CodeTooLarge,
			"archive of %s: more than the %d bytes an inline archive may hold (--max-inline-archive-bytes); download it as a stream (REST) or archive a smaller path", path, s.cfg.MaxInlineArchiveBytes)
	}
	if err != nil {
		return ArchiveContent{}, fmt.Errorf("archive of %s: %w", path, err)
	}
	return ArchiveContent{Path: path, Bytes: int64(len(raw)), ArchiveBase64: base64.StdEncoding.EncodeToString(raw)}, nil
}

// UploadArchive streams a tar archive (optionally gzip-compressed) from r
// into a workspace directory. r is checked to start like a tar or gzip
// stream before anything is sent, and cut at Config.MaxArchiveBytes. The
// agent refuses entries that would land or point outside the workspace;
// on an error the entries extracted before it remain.
func (s *Service) UploadArchive(ctx context.Context, p rbac.Principal, req ArchiveRequest, r io.Reader) (ArchiveResult, error) {
	srv, err := s.execServer(ctx, p, req.ServerID)
	if err != nil {
		return ArchiveResult{}, err
	}
	path := archivePath(req.Path)
	res, sent, err := s.upload(ctx, srv, path, r)
	s.audit(ctx, p, "server.archive.upload", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"path": path, "bytes_sent": sent})
	if err != nil {
		return ArchiveResult{}, err
	}
	s.touch(ctx, srv)
	return res, nil
}

func (s *Service) upload(ctx context.Context, srv store.Server, path string, r io.Reader) (ArchiveResult, int64, error) {
	t, err := s.target(ctx, srv)
	if err != nil {
		return ArchiveResult{}, 0, err
	}
	ctx, idle, stop := s.stream(ctx, srv.ID, "the archive upload")
	defer stop()
	br := bufio.NewReaderSize(idle.CallerReader(r), archiveCopyBuffer)
	if err := checkTar(br); err != nil {
		return ArchiveResult{}, 0, err
	}
	body := &capReader{r: br, left: s.cfg.MaxArchiveBytes}
	h := http.Header{"Content-Type": {"application/x-tar"}}
	resp, err := s.sendAgent(ctx, t, http.MethodPut, archiveQuery(path), h, body)
	// What cut the body is the reason, whatever the transport or the
	// agent made of the cut.
	sent, cut := body.result()
	switch {
	case errors.Is(cut, errArchiveTooLarge):
		if resp != nil {
			resp.Body.Close()
		}
		return ArchiveResult{}, sent, archiveTooLarge(path, s.cfg.MaxArchiveBytes, "--max-archive-bytes")
	case cut != nil:
		if resp != nil {
			resp.Body.Close()
		}
		return ArchiveResult{}, sent, wire.Errorf(wire.CodeBadRequest, "archive: reading it failed after %d bytes: %v", sent, cut)
	case err != nil:
		return ArchiveResult{}, sent, fmt.Errorf("extract into %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := s.readAnswer(ctx, srv.ID, resp, maxSmallAnswer)
	if err != nil {
		return ArchiveResult{}, sent, err
	}
	var out wire.FileResult
	if err := decodeAnswer(srv.ID, raw, &out); err != nil {
		return ArchiveResult{}, sent, err
	}
	return ArchiveResult{Path: out.Path, Bytes: out.Bytes}, sent, nil
}

// UploadArchiveInline extracts an archive given whole, as base64 (for
// callers that cannot stream), bounded by Config.MaxInlineArchiveBytes.
func (s *Service) UploadArchiveInline(ctx context.Context, p rbac.Principal, req UploadArchiveRequest) (ArchiveResult, error) {
	limit := s.cfg.MaxInlineArchiveBytes
	if n := int64(base64.StdEncoding.DecodedLen(len(req.ArchiveBase64))); n > limit+2 {
		return ArchiveResult{}, wire.Errorf(wire.CodeTooLarge,
			"archive_base64: want at most %d bytes decoded (--max-inline-archive-bytes), got about %d; upload larger archives as a stream (REST)", limit, n)
	}
	raw, err := base64.StdEncoding.DecodeString(req.ArchiveBase64)
	if err != nil {
		return ArchiveResult{}, wire.Errorf(wire.CodeBadRequest, "archive_base64: want standard base64, got %v", err)
	}
	if int64(len(raw)) > limit {
		return ArchiveResult{}, wire.Errorf(wire.CodeTooLarge, "archive_base64: want at most %d bytes decoded (--max-inline-archive-bytes), got %d", limit, len(raw))
	}
	return s.UploadArchive(ctx, p, ArchiveRequest{ServerID: req.ServerID, Path: req.Path}, bytes.NewReader(raw))
}

// InlineArchiveRequestBytes is the largest request body an adapter must
// accept to carry an inline archive of the most Config.MaxInlineArchiveBytes
// allow (base64 and the request around it): MCP's body limit must be at
// least this for UploadArchiveInline to reach its own limit.
func (s *Service) InlineArchiveRequestBytes() int64 {
	return int64(base64.StdEncoding.EncodedLen(int(s.cfg.MaxInlineArchiveBytes))) + answerSlack
}

var errArchiveTooLarge = errors.New("archive too large")

// capReader passes at most left bytes of r and records why it stopped
// early. The transport reads it on its own goroutine, hence the lock.
type capReader struct {
	r    io.Reader
	mu   sync.Mutex
	left int64
	sent int64
	err  error
}

func (c *capReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		n, err = int(c.left), errArchiveTooLarge
	}
	c.left -= int64(n)
	c.sent += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}

func (c *capReader) result() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.err
}

// checkTar refuses a stream that starts as neither gzip nor a tar header
// (its checksum must match), so a wrong file is named as such instead of
// as whatever the agent's reader stumbles on. An all-zero first block is
// the end marker of an empty archive.
func checkTar(br *bufio.Reader) error {
	head, err := br.Peek(tarBlock)
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return nil
	}
	switch {
	case len(head) == 0 && (err == nil || errors.Is(err, io.EOF)):
		return wire.Errorf(wire.CodeBadRequest, "archive: want a tar archive, got an empty body")
	case errors.Is(err, io.EOF):
		return wire.Errorf(wire.CodeBadRequest, "archive: want a tar archive, got %d bytes, less than one %d-byte tar header", len(head), tarBlock)
	case err != nil:
		return wire.Errorf(wire.CodeBadRequest, "archive: read it: %v", err)
	}
	if bytes.Count(head, []byte{0}) == tarBlock || tarChecksumOK(head) {
		return nil
	}
	return wire.Errorf(wire.CodeBadRequest, "archive: want a tar archive (optionally gzip-compressed), got data that starts with no tar header (%.16q)", head)
}

// tarChecksumOK checks a header block's checksum field (octal, at 148)
// against the sum of its bytes with that field read as spaces; old tars
// summed signed bytes, so both sums count.
func tarChecksumOK(h []byte) bool {
	field := bytes.Trim(h[148:156], " \x00")
	if len(field) == 0 {
		return false
	}
	var want int64
	for _, c := range field {
		if c < '0' || c > '7' {
			return false
		}
		want = want*8 + int64(c-'0')
	}
	var unsigned, signed int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return want == unsigned || want == signed
}
