package pipe

import (
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReader(t *testing.T) {
	r, w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64)

	// Written before the read: read at once.
	if _, err := w.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "one\n" {
		t.Fatalf("Read = %q, %v, want %q", buf[:n], err, "one\n")
	}

	// A read waiting on an empty pipe gets what is written later.
	got := make(chan string, 1)
	go func() {
		n, err := r.Read(buf)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	w.Write([]byte("two\n"))
	if s := <-got; s != "two\n" {
		t.Fatalf("waiting Read = %q, want %q", s, "two\n")
	}

	// EOF once the write end closes and the pipe is empty.
	w.Write([]byte("three\n"))
	w.Close()
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "three\n" {
		t.Fatalf("Read = %q, %v, want %q", buf[:n], err, "three\n")
	}
	if _, err := r.Read(buf); err != io.EOF {
		t.Fatalf("Read after close = %v, want EOF", err)
	}
}

func TestReader_Stop(t *testing.T) {
	r, w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 64))
		done <- err
	}()
	// Stop ends a read that is waiting (or about to), with the write end
	// still open and the pipe empty.
	r.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("Read after Stop = %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end a waiting Read")
	}
	// Later reads fail even with data in the pipe; Stop again is a no-op.
	w.Write([]byte("late\n"))
	r.Stop()
	if _, err := r.Read(make([]byte, 64)); !errors.Is(err, ErrStopped) {
		t.Fatalf("Read after Stop with data = %v, want ErrStopped", err)
	}
}

// A Stop after Close writes nothing: the descriptor Close freed may
// already be another file of the process.
func TestReader_StopAfterClose(t *testing.T) {
	r, w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	freed := r.stop
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Put a pipe's write end at the number the eventfd had.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	if err := unix.Dup3(p[1], freed, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(freed)
	unix.Close(p[1])
	r.Stop()
	if n, err := unix.Read(p[0], make([]byte, 8)); err != unix.EAGAIN {
		t.Fatalf("Stop after Close wrote to descriptor %d: read %d bytes (%v)", freed, n, err)
	}
}
