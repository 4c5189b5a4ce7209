// Command pause is the sandbox (infrastructure) container of the pods
// on kubetest's real node, as Kubernetes' own pause image is on a
// cluster: it holds the pod's namespaces while its containers come and
// go, reaps the processes orphaned into it (a pod sharing its process
// namespace), and ends on SIGINT or SIGTERM. It is pure Go, built static,
// so its image is this one file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several children.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
