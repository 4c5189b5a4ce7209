package orchestrator

import (
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
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

// encoded is an operation result already encoded as JSON, stored as it
// is (see Service.finish).
type encoded string

// encode returns fr as Marshal would encode it, built at its final size:
// the body can be megabytes of JSON, which encoding/json would grow its
// buffer to step by step, leaving several times its size behind.
func (fr ForwardedResponse) encode() (encoded, error) {
	head, err := wire.Marshal(struct {
		StatusCode int               `json:"status_code"`
		Headers    map[string]string `json:"headers"`
	}{fr.StatusCode, fr.Headers})
	if err != nil {
		return "", err
	}
	const body = `,"body":`
	b := make([]byte, 0, len(head)+len(body)+wire.StringLen(fr.Body))
	b = append(b, head[:len(head)-1]...) // all but the closing brace
	b = append(b, body...)
	b = wire.AppendString(b, fr.Body)
	return encoded(append(b, '}')), nil
}
