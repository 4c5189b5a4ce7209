package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/wire"
)

// operation serves one operation of the catalogue: its input from the
// path, the query and the JSON body, decoded the way every adapter
// decodes it, then the service's answer as JSON.
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
