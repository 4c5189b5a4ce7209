package console

import (
	"context"
	"net/http"
	"path"
	"strings"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// What a server's page shows of the sandbox, at most.
const (
	recentOperations = 10
	logLines         = 100
	fileLines        = 500
	// consoleSession is the persistent shell the command box runs in.
	consoleSession = "console"
)

// serverPage is GET /servers/{id}: the server's live status, recent
// operations, log tail, events, command box and file browser (?path= a
// directory, ?file= a file of the workspace).
func (c *Console) serverPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	c.showServer(w, r, v, http.StatusOK, nil)
}

// showServer renders the server's page, with cmd the output of a command
// just run from it.
func (c *Console) showServer(w http.ResponseWriter, r *http.Request, v *Visit, status int, cmd *commandView) {
	ctx := r.Context()
	id := r.PathValue("id")
	d, err := c.serverLiveData(ctx, v, id)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	d.Command = cmd
	q := r.URL.Query()
	switch q.Get("done") {
	case "stop":
		d.Notice = "The server was stopped and its sandbox deleted."
	case "finish":
		d.Notice = "The server is finished: it can be reused by a start with reuse_strategy RESET or RESTART."
	case "restart":
		d.Notice = "The restart was scheduled; the status below follows it."
	case "network":
		d.Notice = "The network policy was changed: the sandbox's next connection is decided by it."
	}
	if logs, err := c.svc.ServerLogs(ctx, v.Principal, id, logLines); err != nil {
		d.LogsError = wire.DetailOf(err).Message
	} else {
		d.Logs = clipTail(logs, maxShownOutput)
	}
	switch {
	case d.Server.Unhealthy:
		// Its agent would hold the page for a call's deadline.
		d.FilesError = "The workspace cannot be browsed while the server's agent does not answer its health checks."
	case d.Server.Status == orchestrator.ServerRunning || d.Server.Status == orchestrator.ServerFinished:
		c.browse(ctx, v, &d, q.Get("path"), q.Get("file"))
	default:
		d.FilesError = "The workspace can be browsed while the server runs (it is " + d.Server.Status + "); reload the page once it does."
	}
	c.render(w, r, v, status, web.PageServer, "servers", serverTitle(d.Server), d)
}

func serverTitle(s orchestrator.Server) string {
	if s.ServerName != "" {
		return "Sandbox " + s.ServerName
	}
	return "Sandbox " + s.ID
}

// serverLiveData is what the live part of a server's page shows.
func (c *Console) serverLiveData(ctx context.Context, v *Visit, id string) (serverData, error) {
	detail, err := c.svc.GetServer(ctx, v.Principal, id)
	if err != nil {
		return serverData{}, err
	}
	ops, err := c.svc.ServerOperations(ctx, v.Principal, id, recentOperations)
	if err != nil {
		return serverData{}, err
	}
	d := serverData{Server: detail.Server, Events: detail.Events, Operations: operationViews(ops)}
	if detail.ClientID != "" {
		if cl, err := c.svc.GetClient(ctx, v.Principal, detail.ClientID); err == nil {
			d.ClientName = cl.Name
		}
	}
	return d, nil
}

// serverLive is the part of a server's page that its event stream
// replaces.
func (c *Console) serverLive(id string) func(ctx context.Context, v *Visit) ([]byte, error) {
	return func(ctx context.Context, v *Visit) ([]byte, error) {
		d, err := c.serverLiveData(ctx, v, id)
		if err != nil {
			return nil, err
		}
		return c.fragment(v, web.FragmentServerLive, "servers", serverTitle(d.Server), d)
	}
}

// browse fills the file browser: the directory dir (workspace-relative,
// "." by default) and, when asked, the file file. The service (and the
// agent, through os.Root) keeps both inside the workspace.
func (c *Console) browse(ctx context.Context, v *Visit, d *serverData, dir, file string) {
	if dir == "" {
		dir = "."
	}
	d.Dir = path.Clean(dir)
	list, err := c.svc.ListFiles(ctx, v.Principal, orchestrator.ListFilesRequest{ServerID: d.Server.ID, Path: d.Dir})
	if err != nil {
		d.FilesError = wire.DetailOf(err).Message
	} else {
		d.Files = &list
	}
	if file == "" {
		return
	}
	fv := &fileView{Path: file}
	res, err := c.svc.ReadFile(ctx, v.Principal, orchestrator.ReadFileRequest{ServerID: d.Server.ID, Path: file, Limit: fileLines})
	if err != nil {
		fv.Error = wire.DetailOf(err).Message
	} else {
		fv.Content, fv.Binary, fv.TotalLines = clip(res.Content, maxShownOutput), res.Binary, res.TotalLines
		fv.More = !res.EOF
	}
	d.File = fv
}

// runCommand is POST /servers/{id}/bash: run the command box's command in
// the server's console shell session and show what it printed. A request
// from the page's script (Berth-Fragment: command) gets only the output
// part, which the script puts in place.
func (c *Console) runCommand(w http.ResponseWriter, r *http.Request, v *Visit) {
	command := r.PostForm.Get("command")
	cmd := &commandView{Command: command}
	if strings.TrimSpace(command) == "" {
		cmd.Error = "Type a command to run."
	} else {
		res, err := c.svc.Bash(r.Context(), v.Principal, r.PathValue("id"), orchestrator.SessionBashRequest{Session: consoleSession,
			SessionExecRequest: wire.SessionExecRequest{Command: command, MaxOutputBytes: wire.Int64(maxShownOutput)}})
		if err != nil {
			if code := wire.DetailOf(err).Code; code == wire.CodeNotFound || code == wire.CodeInternal {
				c.fail(w, r, v, err)
				return
			}
			cmd.Error = wire.DetailOf(err).Message
		} else {
			cmd.Result = &res.BashResult
			cmd.Stdout, cmd.Stderr = clip(res.Stdout, maxShownOutput), clip(res.Stderr, maxShownOutput)
			cmd.StdoutTruncatedBytes = res.StdoutTruncatedBytes + int64(cmd.Stdout.Omitted)
			cmd.StderrTruncatedBytes = res.StderrTruncatedBytes + int64(cmd.Stderr.Omitted)
		}
	}
	if r.Header.Get(fragmentHeader) == "command" {
		if err := c.pages.RenderPage(w, http.StatusOK, web.FragmentCommand, c.page(v, "servers", "", serverData{Command: cmd})); err != nil {
			c.log.Error("render command output", "err", err)
		}
		return
	}
	c.showServer(w, r, v, http.StatusOK, cmd)
}

// fragmentHeader asks a form's answer for the part of the page the
// script replaces rather than the whole page.
const fragmentHeader = "Berth-Fragment"

// serverAction is POST /servers/{id}/{stop,finish,restart}.
func (c *Console) serverAction(action string) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *Visit) {
		ref := orchestrator.ServerRef{ServerID: r.PathValue("id")}
		var err error
		switch action {
		case "stop":
			_, err = c.svc.StopServer(r.Context(), v.Principal, ref)
		case "finish":
			_, err = c.svc.FinishServer(r.Context(), v.Principal, ref)
		case "restart":
			_, err = c.svc.RestartServer(r.Context(), v.Principal, ref, 0)
		}
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		http.Redirect(w, r, "/servers/"+ref.ServerID+"?done="+action, http.StatusSeeOther)
	}
}
