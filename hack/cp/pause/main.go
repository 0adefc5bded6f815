// Command pause holds a pod's namespaces open: the node's sandbox image (localhost/pause),
// built here because no registry can be reached. It sleeps until SIGINT or SIGTERM, and reaps
// any process re-parented to it (it is PID 1 when the pod shares its PID namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
