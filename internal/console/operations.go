package console

import (
	"net/http"
	"net/url"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/web"
)

// operationsPerPage is how many operations the operations page lists.
const operationsPerPage = 50

// operationsPage is GET /operations: the user's recent operations with
// their results, filtered by status, type and server (?status=, ?type=,
// ?server_id=), paged with ?cursor=.
func (c *Console) operationsPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	q := r.URL.Query()
	f := orchestrator.OperationFilter{Status: q.Get("status"), Type: q.Get("type"), ServerID: q.Get("server_id")}
	page, err := c.svc.MyOperations(r.Context(), v.Principal, f, q.Get("cursor"), operationsPerPage)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	servers, err := c.svc.ListServers(r.Context(), v.Principal, "")
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	d := operationsData{Operations: operationViews(page.Operations), Filter: f, Servers: servers,
		Statuses: orchestrator.OperationStatuses, Types: orchestrator.OperationTypes}
	if page.NextCursor != "" {
		next := url.Values{}
		for k, val := range map[string]string{"status": f.Status, "type": f.Type, "server_id": f.ServerID, "cursor": page.NextCursor} {
			if val != "" {
				next.Set(k, val)
			}
		}
		d.Next = "/operations?" + next.Encode()
	}
	c.render(w, r, v, http.StatusOK, web.PageOperations, "operations", "Operations", d)
}
