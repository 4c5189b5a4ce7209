// Package console is berth's web console: the server-rendered pages a
// person signs in to (the start page, the sandboxes and their live server
// pages, the operations list, tokens and administration), served by
// `berth serve` at / and its own paths beside the REST API, /mcp and the
// OAuth pages.
//
// It decides nothing: every page calls the orchestrator's Service (or an
// operation of internal/catalog) with the signed-in user's principal, and
// shows what it answers. Who the browser is comes from the same browser
// session the OAuth pages start (internal/websession, one sign-in for the
// console and /account/apps); forms carry that session's CSRF tokens and
// pass its same-origin check. The markup, the style sheet and the small
// script are package web's.
package console
