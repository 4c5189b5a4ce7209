package console

import (
	"net/http"

	"github.com/berth-mcp/berth/web"
)

// home is the start page: what berth is and a sign-in button, or, signed
// in, the MCP URL and the next step.
func (c *Console) home(w http.ResponseWriter, r *http.Request, v *Visit) {
	c.render(w, r, v, http.StatusOK, web.PageHome, "home", "Home", web.Home{MCPURL: c.opts.PublicURL + "/mcp"})
}
