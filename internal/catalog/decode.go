package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// Param is an input field given outside the JSON object: a REST path or
// query parameter.
type Param struct {
	Name, Value string
	In          string // "path" or "query"
}

// Decode builds the operation's input from a JSON object (the REST body
// or the MCP arguments; empty means {}) and params, the same way for
// every adapter, so the same input gets the same answer and the same
// errors everywhere: unknown fields, wrong types and missing required
// fields are refused naming the field. It returns a pointer to an Input
// value, for Call.
func (o Op) Decode(object []byte, params []Param) (any, error) {
	if len(bytes.TrimSpace(object)) == 0 {
		object = []byte("{}")
	}
	in := reflect.New(o.in)
	if err := wire.DecodeStrict(object, in.Interface()); err != nil {
		if bad := o.badTime(object); bad != nil {
			return nil, bad
		}
		return nil, err
	}
	// Which fields were given: a required field's zero value may be
	// valid (an empty file's content), its absence is not.
	var present map[string]json.RawMessage
	if err := json.Unmarshal(object, &present); err != nil {
		return nil, wire.DecodeError(err)
	}
	if present == nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "want a JSON object, got null")
	}
	for _, p := range params {
		f, ok := o.fields[p.Name]
		if !ok {
			return nil, fmt.Errorf("operation %s: %s parameter %s is not an input field", o.Name, p.In, p.Name)
		}
		v, err := parseParam(f.typ, p)
		if err != nil {
			return nil, err
		}
		dst := in.Elem().FieldByIndex(f.index)
		if _, inBody := present[p.Name]; inBody && !dst.Equal(v) {
			if p.In == "path" {
				return nil, wire.Errorf(wire.CodeBadRequest, "%s %v in the body does not match %q in the path", p.Name, dst.Interface(), p.Value)
			}
			return nil, wire.Errorf(wire.CodeBadRequest, "%s is given both in the query and in the body", p.Name)
		}
		dst.Set(v)
		present[p.Name] = nil
	}
	for name, f := range o.fields {
		if _, ok := present[name]; f.required && !ok {
			return nil, wire.Errorf(wire.CodeBadRequest, "missing required field %q", name)
		}
	}
	return in.Interface(), nil
}

const wantTime = "an RFC 3339 time such as 2026-01-02T15:04:05Z"

// badTime names the time field of object that is not a time, as a
// parameter's error would: encoding/json's error for it names no field.
func (o Op) badTime(object []byte) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(object, &fields) != nil {
		return nil
	}
	for name, f := range o.fields {
		raw, ok := fields[name]
		if !ok || f.typ != reflect.TypeFor[time.Time]() {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return wire.Errorf(wire.CodeBadRequest, "field %q: want %s, got %s", name, wantTime, raw)
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return wire.Errorf(wire.CodeBadRequest, "field %q: want %s, got %q", name, wantTime, s)
		}
	}
	return nil
}

// parseParam converts a parameter's text to a value of typ.
func parseParam(typ reflect.Type, p Param) (reflect.Value, error) {
	v := reflect.New(typ).Elem()
	bad := func(want string) (reflect.Value, error) {
		return v, wire.Errorf(wire.CodeBadRequest, "field %q: want %s, got %q", p.Name, want, p.Value)
	}
	if typ == reflect.TypeFor[time.Time]() {
		at, err := time.Parse(time.RFC3339Nano, p.Value)
		if err != nil {
			return bad(wantTime)
		}
		v.Set(reflect.ValueOf(at))
		return v, nil
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString(p.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(p.Value)
		if err != nil {
			return bad("true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(p.Value, 10, typ.Bits())
		if err != nil {
			return bad("an integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(p.Value, 64)
		if err != nil {
			return bad("a number")
		}
		v.SetFloat(f)
	default:
		return v, fmt.Errorf("%s parameter %s: type %s cannot be a parameter", p.In, p.Name, typ)
	}
	return v, nil
}

// field is one JSON field of an input type.
type field struct {
	index    []int
	typ      reflect.Type
	required bool
}

// fieldsOf lists the JSON fields of a struct type as encoding/json sees
// them, embedded structs' fields promoted. A field is required when its
// tag has neither omitempty nor omitzero, as the inferred JSON Schema
// says.
func fieldsOf(t reflect.Type) map[string]field {
	out := map[string]field{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" || !sf.IsExported() && !sf.Anonymous {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			index := append(append([]int(nil), prefix...), i)
			if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, index)
				continue
			}
			if name == "" {
				name = sf.Name
			}
			required := !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,")
			out[name] = field{index: index, typ: sf.Type, required: required}
		}
	}
	walk(t, nil)
	return out
}
