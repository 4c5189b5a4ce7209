package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// OptionalInt64 is an int64 JSON field that tells three states apart:
// absent (Set false), explicit null (Set true, Null true) and a number.
// IdeGYM's max_output_bytes uses null for "unlimited", so a plain *int64
// cannot express the default.
type OptionalInt64 struct {
	Set   bool
	Null  bool
	Value int64
}

// Int64 returns an OptionalInt64 holding v.
func Int64(v int64) OptionalInt64 { return OptionalInt64{Set: true, Value: v} }

// Null returns an OptionalInt64 holding an explicit null.
func Null() OptionalInt64 { return OptionalInt64{Set: true, Null: true} }

// UnmarshalJSON implements json.Unmarshaler.
func (o *OptionalInt64) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	var v int64
	if err := json.Unmarshal(b, &v); err != nil {
		// A type error lets the decoder name the field it happened in.
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[int64]()}
	}
	o.Value = v
	return nil
}

// MarshalJSON implements json.Marshaler. An unset value marshals as null;
// use omitzero on the field to leave it out.
func (o OptionalInt64) MarshalJSON() ([]byte, error) {
	if !o.Set || o.Null {
		return []byte("null"), nil
	}
	return json.Marshal(o.Value)
}

// IsZero reports whether the field was never set, for omitzero.
func (o OptionalInt64) IsZero() bool { return !o.Set }

// Limit resolves the field into a byte limit: def when absent, -1 (no
// limit) when null, else the value.
func (o OptionalInt64) Limit(def int64) int64 {
	switch {
	case !o.Set:
		return def
	case o.Null:
		return -1
	default:
		return o.Value
	}
}

// jsonKind names the kind of a JSON value for error messages.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	default:
		return "number " + string(b)
	}
}
