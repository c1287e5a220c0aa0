package emukit

import (
	"context"
	"fmt"
	"io"
)

// Emulator is a running emulator (e2bemu.Server, daytonaemu.Server), as
// a command that serves one sees it.
type Emulator interface {
	// HostAddress is this machine's address as the sandboxes reach it.
	HostAddress(ctx context.Context) (string, error)
	// Close stops serving and removes every sandbox.
	Close() error
}

// WriteExports writes env, the variables that point clients at an
// emulator, as shell export lines in their order.
func WriteExports(w io.Writer, env [][2]string) error {
	for _, kv := range env {
		if _, err := fmt.Fprintf(w, "export %s=%s\n", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}
