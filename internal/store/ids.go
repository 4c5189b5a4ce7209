package store

// IsUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form.
// Ids are checked before they reach PostgreSQL so that a malformed id is
// answered as "not found" (or a bad request) rather than an internal
// error about uuid syntax.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// nullUUID turns "" into SQL NULL for optional uuid columns.
func nullUUID(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nonNil returns s, or an empty slice for nil: pgx encodes a nil slice as
// NULL, which the NOT NULL array columns refuse.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
