// Command pause is the test bed's Kubernetes pod sandbox process: PID 1 of
// every pod's sandbox container, holding the pod's namespaces. It sleeps
// until SIGTERM or SIGINT, then exits 0. Built static and shipped alone in
// an image FROM scratch, since no public registry is reachable here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
