package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// berth cp moves files as tar streams through the archive routes (GET
// and PUT /api/servers/{server_id}/archive): a directory travels as its
// contents, a file under its base name, the way the agent archives them.

func newCpCmd(e *env) *cobra.Command {
	var cc clientCmd
	cmd := &cobra.Command{
		Use:   "cp SOURCE DEST",
		Short: "Copy files to or from a server's workspace (as tar)",
		Long: "Copy between this machine and a server's workspace; the server side is SERVER:PATH, PATH relative to the " +
			"workspace (\".\" or empty is its root). A directory is copied as its contents into DEST, created when missing; " +
			"a file keeps its name inside DEST. Paths leaving the workspace are refused by the server; archive entries " +
			"that would leave the local DEST are refused on the way down, and symlinks are left out.",
		Example: "  berth cp ./src 5b1f…:src        # upload: ./src/* into /workspace/src\n" +
			"  berth cp 5b1f…:out ./out        # download: /workspace/out/* into ./out\n" +
			"  berth cp go.mod 5b1f…:          # upload one file into the workspace root",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			srcServer, srcPath, srcRemote := splitRemote(args[0])
			dstServer, dstPath, dstRemote := splitRemote(args[1])
			var res orchestrator.ArchiveResult
			switch {
			case srcRemote == dstRemote:
				return wire.Errorf(wire.CodeBadRequest, "cp: exactly one of SOURCE and DEST must be SERVER:PATH (got %q and %q)", args[0], args[1])
			case dstRemote:
				res, err = upload(cmd.Context(), r, args[0], dstServer, dstPath)
			default:
				res, err = download(cmd.Context(), r, srcServer, srcPath, args[1])
			}
			if err != nil {
				return err
			}
			if cc.out == "json" {
				return writeJSON(e.stdout, res)
			}
			fmt.Fprintf(e.stderr, "copied %d bytes (%s)\n", res.Bytes, res.Path)
			return nil
		},
	}
	cc.register(cmd)
	return cmd
}

// splitRemote reads SERVER:PATH. A Windows drive letter (C:\x) is local.
func splitRemote(arg string) (server, p string, ok bool) {
	i := strings.Index(arg, ":")
	if i <= 0 || (i == 1 && len(arg) > 2 && (arg[2] == '\\' || arg[2] == '/')) || strings.ContainsAny(arg[:i], `/\`) {
		return "", "", false
	}
	return arg[:i], arg[i+1:], true
}

func archiveURL(r *remote, server, p string) string {
	if p == "" {
		p = "."
	}
	return r.URL + "/api/servers/" + url.PathEscape(server) + "/archive?" + url.Values{"path": {p}}.Encode()
}

// upload streams a tar of local into the server's dir.
func upload(ctx context.Context, r *remote, local, server, dir string) (orchestrator.ArchiveResult, error) {
	var res orchestrator.ArchiveResult
	fi, err := os.Stat(local)
	if err != nil {
		return res, fmt.Errorf("cp: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, local, fi)) }()
	defer pr.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, archiveURL(r, server, dir), pr)
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := r.HTTP().Do(req)
	if err != nil {
		return res, r.transportError(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return res, answerError(r, "PUT", "/api/servers/"+server+"/archive", resp.StatusCode, resp.Status, raw)
	}
	return res, jsonInto(raw, &res)
}

// writeTar writes local (a directory's contents, or a file by its base
// name) as a tar. Symlinks are stored as links; the server refuses any
// that point out of the workspace.
func writeTar(w io.Writer, local string, fi fs.FileInfo) error {
	tw := tar.NewWriter(w)
	add := func(p, name string, fi fs.FileInfo) error {
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			link = l
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, devices, FIFOs
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = name
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	var err error
	if fi.IsDir() {
		err = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == local {
				return err
			}
			rel, err := filepath.Rel(local, p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return add(p, filepath.ToSlash(rel), info)
		})
	} else {
		err = add(local, filepath.Base(local), fi)
	}
	if err != nil {
		return fmt.Errorf("cp: archive %s: %w", local, err)
	}
	return tw.Close()
}

// download extracts the tar of the server's p into local.
func download(ctx context.Context, r *remote, server, p, local string) (orchestrator.ArchiveResult, error) {
	res := orchestrator.ArchiveResult{Path: local}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, archiveURL(r, server, p), nil)
	if err != nil {
		return res, err
	}
	resp, err := r.HTTP().Do(req)
	if err != nil {
		return res, r.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return res, answerError(r, "GET", "/api/servers/"+server+"/archive", resp.StatusCode, resp.Status, raw)
	}
	body := &countingReader{r: resp.Body}
	n, err := extractTar(body, local)
	res.Bytes = n
	if err != nil && errors.Is(err, io.ErrUnexpectedEOF) {
		err = cutArchiveError(resp.Header.Get(api.ArchiveLimitHeader), body.n, p, local, err)
	}
	return res, err
}

// cutArchiveError says why a download's stream ended early: berth cuts an
// archive larger than its limit after exactly that many bytes (and aborts
// the stream, so no client takes it for a whole archive); anything else is
// a broken stream.
func cutArchiveError(limitHeader string, got int64, p, local string, err error) error {
	if limit, perr := strconv.ParseInt(limitHeader, 10, 64); perr == nil && got == limit {
		return wire.Errorf(wire.CodeTooLarge,
			"cp: the archive of %s is larger than the %d bytes the server allows (its --max-archive-bytes), so it was cut there; what came before the cut is in %s; copy a smaller path", p, limit, local)
	}
	return fmt.Errorf("cp: the archive of %s ended after %d bytes, before its end (the sandbox stopped or the connection broke); what came before is in %s: %w", p, got, local, err)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// extractTar extracts a tar into dir (created when missing). The
// archive comes from a sandbox, so nothing in it may reach outside dir:
// entries are resolved inside an os.Root, absolute and ../ names are
// refused, and symlinks are not created.
func extractTar(r io.Reader, dir string) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("cp: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("cp: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("cp: read the archive: %w", err)
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		if !fs.ValidPath(name) || strings.Contains(h.Name, `\`) {
			return total, wire.Errorf(wire.CodeBadGateway, "cp: the archive holds %q, which would leave %s: refused", h.Name, dir)
		}
		if name == "." {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return total, fmt.Errorf("cp: %s: %w", name, err)
			}
		case tar.TypeReg:
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return total, fmt.Errorf("cp: %s: %w", name, err)
				}
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fs.FileMode(h.Mode).Perm()&0o755|0o600)
			if err != nil {
				return total, fmt.Errorf("cp: %s: %w", name, err)
			}
			n, err := io.Copy(f, tr)
			total += n
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return total, fmt.Errorf("cp: %s: %w", name, err)
			}
		default:
			// Symlinks and the rest are left out: a link made here
			// could later lead a write out of dir.
		}
	}
}
