package schema

import "github.com/google/jsonschema-go/jsonschema"

// Portable rewrites s, in place, into the subset strict function-calling
// clients accept (what `mcp-inspector --strict` lints for): no `type`
// arrays. Go's pointers and slices infer as ["null", T]; in an input an
// absent field already says "none", so the null is dropped; in an output
// berth may send null, so the type becomes anyOf [T, null], each branch of
// one type.
func Portable(s *jsonschema.Schema, input bool) {
	walk(s, func(s *jsonschema.Schema) {
		if len(s.Types) == 0 {
			return
		}
		var types []string
		nullable := false
		for _, t := range s.Types {
			if t == "null" {
				nullable = true
			} else {
				types = append(types, t)
			}
		}
		s.Types = nil
		if len(types) == 1 && (input || !nullable) {
			s.Type = types[0]
			return
		}
		// The value's own keywords go with its branch; description,
		// title and default stay on the whole.
		branch := *s
		branch.Description, branch.Title, branch.Default = "", "", nil
		keep := jsonschema.Schema{Description: s.Description, Title: s.Title, Default: s.Default}
		for _, t := range types {
			b := branch
			b.Type = t
			keep.AnyOf = append(keep.AnyOf, &b)
		}
		if nullable && !input {
			keep.AnyOf = append(keep.AnyOf, &jsonschema.Schema{Type: "null"})
		}
		*s = keep
	})
}

// walk calls fn on s and every schema inside it, depth first.
func walk(s *jsonschema.Schema, fn func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	for _, p := range s.Properties {
		walk(p, fn)
	}
	for _, d := range s.Defs {
		walk(d, fn)
	}
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for _, sub := range list {
			walk(sub, fn)
		}
	}
	walk(s.Items, fn)
	walk(s.AdditionalProperties, fn)
	fn(s)
}
