package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger the go-sdk gets: berth's, without the SDK's
// Info lines. On the stateless handler the SDK connects and disconnects a
// server session for every request and logs each at Info ("server
// session connected", "server session disconnected" twice), three lines
// of no use per MCP call: measured at 3.5% of berth's CPU per bash call,
// and a log that grows by three lines a command. Its warnings and errors
// still reach berth's log.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

// minLevel drops records below its level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
