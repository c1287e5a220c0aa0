package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for a harness's stdout pipe: a harness
// that prints a burst faster than the bridge reads it is held back only
// after that much (the default is 64 KiB), so a reader's short pause does
// not stall it. Linux grants up to fs.pipe-max-size (1 MiB by default).
const pipeSize = 1 << 20

// growPipe asks for pipeSize on the pipe of f; a refusal keeps its size.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	}
}
