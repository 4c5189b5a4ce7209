package image

import (
	"fmt"
	"sync/atomic"
)

// budget is one image's allowance of entries and unpacked bytes, drawn
// on by every layer it unpacks (concurrently) and by the cached layers it
// reuses, so that a hostile image stops at the bound wherever its entries
// are.
type budget struct {
	maxEntries, maxBytes int64
	entries, bytes       atomic.Int64
}

func (b *budget) take(entries, bytes int64) error {
	if n := b.entries.Add(entries); n > b.maxEntries {
		return fmt.Errorf("the image has over %d entries (the limit)", b.maxEntries)
	}
	if n := b.bytes.Add(bytes); n > b.maxBytes {
		return fmt.Errorf("declares %d bytes: the image's files add up to over %d bytes (the limit)", bytes, b.maxBytes)
	}
	return nil
}
