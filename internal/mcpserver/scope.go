package mcpserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// scopeCheck refuses JSON-RPC batches that are too long or of a protocol
// version without batches (batch.go). It answers a tools/call (or a
// tasks/cancel) the token's scopes do not cover, as the catalogue declares
// them for the call's arguments, with HTTP 403 and an insufficient_scope
// challenge naming every scope needed, so OAuth clients step up once.
// Tools stay listed for every token: agents learn they exist. Ownership is
// left to the service, which answers inside the tool result.
//
// It also picks the answer's form: a request whose params._meta carries a
// progressToken (in any message of a batch) goes to stream (server-sent
// events, so progress notifications can precede the result), every other
// one to next (plain JSON). Only that field counts: the same word in a
// command or a file's content asks for nothing.
func (s *Server) scopeCheck(next, stream http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				wire.WriteError(w, wire.Errorf(wire.CodeTooLarge, "request body is larger than %d bytes", mbe.Limit))
				return
			}
			wire.WriteError(w, wire.Errorf(wire.CodeBadRequest, "read request body: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		calls, refusal := readCalls(body, r.Header.Get("MCP-Protocol-Version"))
		if refusal != "" {
			writeRPCError(w, codeInvalidRequest, refusal)
			return
		}
		p, _ := auth.PrincipalFrom(r.Context())
		if missing := s.missingScopes(p, calls); len(missing) > 0 {
			auth.WriteInsufficientScope(w, r, s.opts.Auth, missing, "this token lacks the scope the called tool needs")
			return
		}
		if s.serveTasks(w, r, body, next) {
			return
		}
		if slices.ContainsFunc(calls, func(c rpcCall) bool { return c.WantsProgress }) {
			stream.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// missingScopes returns the scopes the tools called need and p's token
// lacks, as the catalogue declares them for each call's arguments (see
// catalog.Op.Scopes); tasks/cancel is cancel_operation by another name.
// Arguments the tool will refuse count for nothing here: the call is
// then refused for them, by the tool.
func (s *Server) missingScopes(p rbac.Principal, calls []rpcCall) []rbac.Scope {
	need := map[rbac.Scope]bool{}
	for _, c := range calls {
		var o catalog.Op
		var in any
		switch c.Method {
		case "tools/call":
			var ok bool
			if o, ok = s.tools[c.Tool]; !ok {
				continue // unknown tools get the SDK's -32602
			}
			in, _ = decodeArguments(o, c.Args)
		case "tasks/cancel":
			o = s.cancel
		default:
			continue
		}
		for _, sc := range o.MissingScopes(p, in) {
			need[sc] = true
		}
	}
	out := make([]rbac.Scope, 0, len(need))
	for sc := range need {
		out = append(out, sc)
	}
	rbac.SortScopes(out)
	return out
}
