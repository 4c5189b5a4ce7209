package image

import "fmt"

// maxNotes bounds the notes kept of a layer.
const maxNotes = 20

// entryError is a refused entry; the caller adds the image and layer.
type entryError struct {
	entry string
	err   error
}

func (e *entryError) Error() string { return fmt.Sprintf("entry %q: %v", e.entry, e.err) }
func (e *entryError) Unwrap() error { return e.err }

func refuse(entry, format string, args ...any) error {
	return &entryError{entry: entry, err: fmt.Errorf(format, args...)}
}

// unpacked is what unpacking a layer found.
type unpacked struct {
	Entries    int64    `json:"entries"`
	Bytes      int64    `json:"bytes"` // declared bytes of every entry
	DiskBytes  int64    `json:"disk_bytes"`
	RootOpaque bool     `json:"root_opaque,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	MoreNotes  int      `json:"more_notes,omitempty"`
}

func (u *unpacked) note(format string, args ...any) {
	if len(u.Notes) < maxNotes {
		u.Notes = append(u.Notes, fmt.Sprintf(format, args...))
		return
	}
	u.MoreNotes++
}
