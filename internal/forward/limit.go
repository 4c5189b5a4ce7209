package forward

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// ErrAnswerTooLarge is in the chain of the error a limited body returns
// once the agent sent more than its limit.
var ErrAnswerTooLarge = errors.New("answer too large")

// limitBody cuts body, an answer of announced length (-1: unknown), at
// limit bytes. An agent is untrusted (root in its sandbox can answer in
// its place), so berth never reads an answer of unknown size whole:
// reading past the limit fails with a bad_gateway error naming the server
// and the limit (and calls tripped with it), and nothing more is read.
// What is read counts against f.Budget (if set) until the body is closed.
func (f *Forwarder) limitBody(ctx context.Context, body io.ReadCloser, limit, length int64, serverID string, tripped func(error)) *limitedBody {
	need := limit
	if length >= 0 {
		need = min(length, limit)
	}
	return &limitedBody{ReadCloser: body, left: limit, limit: limit, serverID: serverID, tripped: tripped,
		ctx: ctx, budget: f.Budget, need: need - freeBytes}
}

// ReadBody reads resp's body whole, at most limit bytes of it (more is a
// bad_gateway error naming the server and the limit, and nothing more is
// read), and leaves resp.Body in place for the caller to close once it is
// done with the bytes: until then they count against f.Budget. An answer
// a deadline of ctx cut (Bound, WithIdle) is a gateway_timeout error. An answer
// announcing more than limit is refused before any of it is read.
// One of unknown length is read in blocks of 1 MiB: growing one buffer
// would leave a trail of ever larger copies, several times the answer,
// for the garbage collector, which is what a sandbox flooding berth would
// exploit; blocks cost what was sent, and the same blocks serve the next
// answer.
func (f *Forwarder) ReadBody(ctx context.Context, resp *http.Response, limit int64, serverID string) ([]byte, error) {
	b, err := f.readBody(ctx, resp, limit, serverID)
	if err != nil {
		// A deadline of ctx cutting the answer is the reason, whatever
		// the transport made of it.
		return nil, CutOr(ctx, err)
	}
	return b, nil
}

func (f *Forwarder) readBody(ctx context.Context, resp *http.Response, limit int64, serverID string) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, tooLarge(serverID, limit)
	}
	lb := f.limitBody(ctx, resp.Body, limit, resp.ContentLength, serverID, nil)
	resp.Body = lb
	if resp.ContentLength >= 0 {
		// The transport ends the body at its Content-Length.
		b := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(lb, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var blocks [][]byte
	size := 0
	for n := firstBlock; ; n = readBlock {
		b := make([]byte, n)
		got, err := io.ReadFull(lb, b)
		blocks, size = append(blocks, b[:got]), size+got
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(blocks) == 1 {
		return blocks[0], nil
	}
	out := make([]byte, 0, size)
	for _, b := range blocks {
		out = append(out, b...)
	}
	return out, nil
}

// ReadBody reads an answer of unknown length in blocks of readBlock
// bytes, after a first small one.
const (
	firstBlock = freeBytes
	readBlock  = 1 << 20
)

func tooLarge(serverID string, limit int64) error {
	return wire.Errorf(wire.CodeBadGateway, "server %s answered more than %d bytes, berth's limit for this answer; it read no further (%w)", serverID, limit, ErrAnswerTooLarge)
}

type limitedBody struct {
	io.ReadCloser
	left, limit int64
	serverID    string
	err         error
	tripped     func(error)

	// Budget: the first freeBytes are read without a reservation, then
	// need bytes are reserved at once.
	ctx    context.Context
	budget *Budget
	need   int64

	took bool // a reservation was taken; Read's own

	mu       sync.Mutex // guards what Close shares with Read and the timer
	reserved int64
	hold     *time.Timer
	expired  bool
	closed   bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if err := l.reserve(); err != nil {
		l.err = err
		return 0, err
	}
	if read := l.limit - l.left; l.budget != nil && !l.took && read < freeBytes {
		// Not past the free bytes without a reservation.
		p = p[:min(int64(len(p)), freeBytes-read)]
	}
	// Ask for one byte more than is left, to tell an answer of exactly
	// the limit from a longer one.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.ReadCloser.Read(p)
	if int64(n) > l.left {
		n, l.left = int(l.left), 0
		l.err = tooLarge(l.serverID, l.limit)
		if l.tripped != nil {
			l.tripped(l.err)
		}
		return n, l.err
	}
	l.left -= int64(n)
	if err != nil {
		l.mu.Lock()
		if l.expired {
			err = wire.Errorf(wire.CodeBadGateway, "server %s took more than %s to send its answer; berth stopped waiting for it", l.serverID, l.budget.Hold)
		}
		l.mu.Unlock()
		l.err = err
	}
	return n, err
}

// reserve takes the budget the rest of the answer may need once its free
// bytes are read, and starts the clock on holding it.
func (l *limitedBody) reserve() error {
	if l.budget == nil || l.took || l.need <= 0 || l.limit-l.left < freeBytes {
		return nil
	}
	n, err := l.budget.reserve(l.ctx, l.need, l.serverID)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.budget.release(n)
		return errors.New("read on a closed body")
	}
	l.took, l.reserved = true, n
	l.hold = time.AfterFunc(l.budget.Hold, func() {
		l.mu.Lock()
		l.expired = true
		l.mu.Unlock()
		// Unblocks a Read waiting for a sandbox that sends nothing.
		l.ReadCloser.Close()
	})
	return nil
}

// Close closes the body and gives back its reservation.
func (l *limitedBody) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		if l.hold != nil {
			l.hold.Stop()
		}
		l.budget.releaseIfSet(l.reserved)
		l.reserved = 0
	}
	l.mu.Unlock()
	return l.ReadCloser.Close()
}
