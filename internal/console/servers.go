package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// serversPage is GET /servers: the user's servers and clients, and a form
// to start one.
func (c *Console) serversPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	data, err := c.serversData(r.Context(), v)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, web.PageServers, "servers", "Sandboxes", data)
}

func (c *Console) serversData(ctx context.Context, v *Visit) (serversData, error) {
	servers, err := c.svc.ListServers(ctx, v.Principal, "")
	if err != nil {
		return serversData{}, err
	}
	clients, err := c.svc.ListClients(ctx, v.Principal)
	if err != nil {
		return serversData{}, err
	}
	d := serversData{Servers: servers, Clients: clients, ClientNames: map[string]string{},
		Images: c.svc.KnownImages(), MCPURL: c.opts.PublicURL + "/mcp"}
	if c.svc.CarriesEgress() {
		d.Network = &egress.Policy{}
	}
	for _, cl := range clients {
		d.ClientNames[cl.ID] = cl.Name
		if cl.Status == orchestrator.ClientAlive {
			d.LiveClients = append(d.LiveClients, cl)
		}
	}
	return d, nil
}

// serversLive is the part of the sandboxes page that its event stream
// replaces.
func (c *Console) serversLive(ctx context.Context, v *Visit) ([]byte, error) {
	data, err := c.serversData(ctx, v)
	if err != nil {
		return nil, err
	}
	return c.fragment(v, web.FragmentServersLive, "servers", "Sandboxes", data)
}

// networkForm reads the network fields of a form: nil when none was
// chosen (the operator's default).
func networkForm(f url.Values) *egress.Policy {
	mode := strings.TrimSpace(f.Get("network"))
	if mode == "" {
		return nil
	}
	p := &egress.Policy{Egress: egress.Mode(mode)}
	for _, line := range strings.FieldsFunc(f.Get("allow"), func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if line = strings.TrimSpace(line); line != "" {
			p.Allow = append(p.Allow, line)
		}
	}
	return p
}

// setNetwork is POST /servers/{id}/network.
func (c *Console) setNetwork(w http.ResponseWriter, r *http.Request, v *Visit) {
	id := r.PathValue("id")
	p := networkForm(r.PostForm)
	if p == nil {
		c.fail(w, r, v, wire.Errorf(wire.CodeBadRequest, "Choose a network policy."))
		return
	}
	if _, err := c.svc.SetServerNetwork(r.Context(), v.Principal, orchestrator.SetServerNetworkRequest{
		ServerRef: orchestrator.ServerRef{ServerID: id}, Network: *p}); err != nil {
		c.fail(w, r, v, err)
		return
	}
	http.Redirect(w, r, "/servers/"+id+"?done=network#network", http.StatusSeeOther)
}

// startServer is POST /servers: start a server for a client of the user's
// (registering a new one when none is chosen), then show its page, where
// it comes up live.
func (c *Console) startServer(w http.ResponseWriter, r *http.Request, v *Visit) {
	ctx := r.Context()
	f := r.PostForm
	clientID := f.Get("client_id")
	if clientID == "" {
		name := strings.TrimSpace(f.Get("client_name"))
		if name == "" {
			name = "console"
		}
		cl, err := c.svc.RegisterClient(ctx, v.Principal, orchestrator.RegisterClientRequest{Name: name})
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		clientID = cl.ID
	}
	image := strings.TrimSpace(f.Get("image_tag"))
	if image == "" {
		c.fail(w, r, v, wire.Errorf(wire.CodeBadRequest, "Choose an image to start the sandbox from."))
		return
	}
	op, err := c.svc.StartServer(ctx, v.Principal, orchestrator.StartServerRequest{
		ClientID: clientID, ImageTag: image, ServerName: strings.TrimSpace(f.Get("server_name")),
		Network: networkForm(f),
	})
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	if op.ServerID == "" {
		http.Redirect(w, r, "/operations", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/servers/"+op.ServerID, http.StatusSeeOther)
}
