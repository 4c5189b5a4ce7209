// Package netns opens sockets in another network namespace (Linux only):
// berth's egress gateway listens inside each sandbox's namespace while it
// serves and dials from its own, and the tests' hosts listen in
// namespaces the tests create. A socket stays in the namespace it was
// made in, so any goroutine may serve it afterwards; only its creation
// runs on an OS thread moved into the namespace and moved back.
package netns
