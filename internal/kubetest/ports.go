package kubetest

import (
	"fmt"
	"net"
)

// freePorts returns n distinct TCP ports free on 127.0.0.1 now. The
// listeners are held until all are chosen, so the kernel hands out n
// different ports; a process started later may still lose a race for one,
// which Start reports as that component failing to start.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
