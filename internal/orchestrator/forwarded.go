package orchestrator

import (
	"net/http"
	"strings"
)

// ForwardedResponse is a forwarded HTTP response as stored in an
// operation's result (run_bash_command) or returned by forward_request:
// body holds the agent's answer.
type ForwardedResponse struct {
	StatusCode int               `json:"status_code"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
}

// forwardedResponse records an agent's answer, whose headers the
// forwarder has sanitized already (forward.SanitizeResponse). A header
// sent more than once is kept as one comma-separated value, as HTTP
// combines field lines, so no value is lost: berth's own
// Content-Security-Policy next to a sandbox's, for one.
func forwardedResponse(resp *http.Response, body string) ForwardedResponse {
	fr := ForwardedResponse{StatusCode: resp.StatusCode, Headers: make(map[string]string, len(resp.Header)), Body: body}
	for k, v := range resp.Header {
		fr.Headers[k] = strings.Join(v, ", ")
	}
	return fr
}
