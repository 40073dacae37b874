// Command nodepause is the sandbox ("pause") container of the test environment's real node (internal/testenv,
// node.go): it holds the pod's namespaces, reaps the zombies of processes that re-parent to it, and exits 0 on
// SIGINT or SIGTERM. It is built statically at test time and packed into an image, never pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
