package forward

import (
	"errors"
	"io"

	"github.com/berth-mcp/berth/internal/wire"
)

// ErrAnswerTooLarge is in the chain of the error a limited body returns
// once the agent sent more than its limit.
var ErrAnswerTooLarge = errors.New("answer too large")

// LimitBody cuts body at limit bytes. An agent is untrusted (root in its
// sandbox can answer in its place), so berth never reads an answer of
// unknown size whole: reading past the limit fails with a bad_gateway
// error naming the server and the limit, and nothing more is read.
func LimitBody(body io.ReadCloser, limit int64, serverID string) io.ReadCloser {
	return &limitedBody{ReadCloser: body, left: limit, limit: limit, serverID: serverID}
}

// ReadBody reads body whole as LimitBody limits it.
func ReadBody(body io.ReadCloser, limit int64, serverID string) ([]byte, error) {
	return io.ReadAll(LimitBody(body, limit, serverID))
}

type limitedBody struct {
	io.ReadCloser
	left, limit int64
	serverID    string
	err         error
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	// Ask for one byte more than is left, to tell an answer of exactly
	// the limit from a longer one.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.ReadCloser.Read(p)
	if int64(n) > l.left {
		n, l.left = int(l.left), 0
		l.err = wire.Errorf(wire.CodeBadGateway, "server %s answered more than %d bytes, berth's limit for this answer; it read no further (%w)", l.serverID, l.limit, ErrAnswerTooLarge)
		return n, l.err
	}
	l.left -= int64(n)
	if err != nil {
		l.err = err
	}
	return n, err
}
