// Package rbac is the one place that decides who may do what in berth.
//
// A request is allowed when three checks pass, in this order:
//
//  1. Scope: the presented token carries the scope the action needs. A token
//     lacking it is refused with 403 before anything else is looked at, so
//     a narrow token learns nothing about which resources exist.
//  2. Ownership: a resource owned by someone else is reported as not found
//     (404) to everyone but admins of its namespace, so that a user cannot
//     probe for other users' resources.
//  3. Role: a role bound to the user (directly or through a group) in the
//     resource's namespace, or globally, grants the action.
//
// The package is pure: callers resolve role bindings and load resources,
// then ask Authorize.
package rbac
