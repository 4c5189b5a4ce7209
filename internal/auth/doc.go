// Package auth owns berth's session-token format and the HTTP middleware
// that turns a presented credential into an rbac.Principal. It decides who
// is calling; what they may do is internal/rbac's business.
package auth
