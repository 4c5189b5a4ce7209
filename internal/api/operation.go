package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// operation serves one operation of the catalogue: its input from the
// path, the query and the JSON body, decoded the way every adapter
// decodes it, the token's scopes checked against those the catalogue
// declares for that input, then the service's answer as JSON.
func (s *server) operation(o catalog.Op) http.Handler {
	pathParams := o.REST.PathParams()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if o.REST.HasBody() {
			var err error
			if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					err = wire.Errorf(wire.CodeTooLarge, "request body is larger than %d bytes", mbe.Limit)
				} else {
					err = wire.Errorf(wire.CodeBadRequest, "read request body: %v", err)
				}
				s.fail(w, r, err)
				return
			}
		}
		params := make([]catalog.Param, 0, len(pathParams)+len(o.REST.Query))
		for _, name := range pathParams {
			params = append(params, catalog.Param{Name: name, Value: chi.URLParam(r, name), In: "path"})
		}
		if len(o.REST.Query) > 0 {
			q := r.URL.Query()
			for _, name := range o.REST.Query {
				if q.Has(name) {
					params = append(params, catalog.Param{Name: name, Value: q.Get(name), In: "query"})
				}
			}
		}
		in, err := o.Decode(body, params)
		// A token that may not make the call at all learns that first,
		// whatever its input; one that may is told what its input needs.
		if s.lacksScope(w, r, o, in) {
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ctx := catalog.WithSession(r.Context(), r.Header.Get(catalog.SessionHeader))
		out, err := o.Call(ctx, principal(r), in)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, out)
	})
}

// lacksScope answers 403 insufficient_scope, naming every scope missing,
// when the caller's token lacks one the operation needs for in (nil: for
// any input), and reports whether it did.
func (s *server) lacksScope(w http.ResponseWriter, r *http.Request, o catalog.Op, in any) bool {
	missing := o.MissingScopes(principal(r), in)
	if len(missing) == 0 {
		return false
	}
	auth.WriteInsufficientScope(w, r, s.opts.Auth, missing,
		fmt.Sprintf("token lacks scope %s needed for %s", strings.Join(rbac.ScopeStrings(missing), " "), o.Name))
	return true
}
