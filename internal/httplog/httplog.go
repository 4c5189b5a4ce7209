// Package httplog owns berth's access log: one Info line per HTTP request
// saying who called what and how it went. The line carries the route
// pattern (never the raw path, whose query may hold values), the MCP
// tool, the status, the duration, the caller's user id and the request
// id; never a header value, a token or a request body.
package httplog

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/berth-mcp/berth/internal/observe"
)

// Observer logs each request to log once it was served (api.Options.Observe).
func Observer(log *slog.Logger) observe.HTTPObserver {
	end := func(info *observe.Request) {
		attrs := make([]slog.Attr, 0, 7)
		attrs = append(attrs, slog.String("method", info.Method), slog.String("route", route(info.Route)))
		if tool := info.Tool(); tool != "" {
			attrs = append(attrs, slog.String("tool", tool))
		}
		attrs = append(attrs, slog.Int("status", info.Status),
			slog.Float64("duration_ms", float64(info.Duration.Microseconds())/1000))
		if user := info.User(); user != "" {
			attrs = append(attrs, slog.String("user_id", user))
		}
		attrs = append(attrs, slog.String("request_id", info.RequestID))
		log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
	}
	return func(r *http.Request) (*http.Request, func(*observe.Request)) {
		if !log.Enabled(r.Context(), slog.LevelInfo) {
			return r, nil
		}
		return r, end
	}
}

// route names a request no route matched (the console's pages, unknown
// paths) without its path.
func route(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	return pattern
}
