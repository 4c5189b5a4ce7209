// Package fds keeps the descriptors a process hands to the programs it
// runs to those it names. Go opens each descriptor of its own
// close-on-exec, but one the process inherited when it was executed (a
// pipe its parent left open, a supervisor's socket) carries no such flag:
// every program the process starts gets it too, and through berth that
// reached every command of every sandbox. berth-agent and the sandbox's
// init call CloseInherited first thing; berth's local runtime calls
// CloseOnExecFrom before it starts a sandbox.
package fds
