//go:build cgo && linux && !race

// A box-bridge built with cgo (a plain `go install` on a machine with a C
// compiler: net and os/user then link the C library) is linked statically
// all the same, so that it runs in any box image. Names resolve with Go's
// own resolver, never the static C library's.

//go:debug netdns=go

package main

// #cgo LDFLAGS: -static
import "C"
