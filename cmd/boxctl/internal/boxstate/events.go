package boxstate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// followEvery is how often a following reader looks for new events.
const followEvery = 100 * time.Millisecond

// EventLog is the state's lifecycle events: an append-only file of JSON
// lines beside the state file (boxes.json -> boxes.events.jsonl, mode
// 0600). Each Append writes one whole line under an exclusive flock of
// the file, so the lines of concurrent processes never interleave; a
// reader takes no lock and reads only whole lines, so it never sees half
// an event. It is safe for concurrent use by any number of processes.
type EventLog struct {
	path string
}

// Events returns the event log beside the state file.
func (s *Store) Events() *EventLog {
	return &EventLog{path: strings.TrimSuffix(s.path, filepath.Ext(s.path)) + ".events.jsonl"}
}

// Record appends ev to the event log beside the state file; a failed
// append is logged (Options.Logger), never the caller's failure. It is
// the sandbox.Options.OnEvent of the boxes this state keeps.
func (s *Store) Record(ev sandbox.Event) {
	s.record(nil, ev)
}

// record appends ev to the event log and adds its webhook deliveries
// (Webhooks) to the outbox, finding the box's endpoints in st, or in the
// state now when st is nil.
func (s *Store) record(st *State, ev sandbox.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if err := s.Events().Append(ev); err != nil {
		s.log.Warn("record event", "type", ev.Type, "err", err)
	}
	s.queueWebhooks(st, ev)
}

// Path is the event log's file.
func (l *EventLog) Path() string { return l.path }

// Append adds ev as one line, stamped now when its Time is zero.
func (l *EventLog) Append(ev sandbox.Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("event log: lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	return nil
}

// Read calls fn with each event in the log, oldest first. With follow it
// then waits for new ones (a log that does not exist yet counts as
// empty) until ctx ends, and returns ctx's error; without, it returns at
// the end of the log. A line that is not an event is an error. fn's error
// ends the read and is returned.
func (l *EventLog) Read(ctx context.Context, follow bool, fn func(sandbox.Event) error) error {
	var (
		f    *os.File
		rd   *bufio.Reader
		part []byte // a line not yet ended by its newline
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		if f == nil {
			var err error
			f, err = os.Open(l.path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				f = nil
			case err != nil:
				return fmt.Errorf("event log: %w", err)
			default:
				rd = bufio.NewReader(f)
			}
		}
		for f != nil {
			line, err := rd.ReadBytes('\n')
			part = append(part, line...)
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("event log: %w", err)
			}
			var ev sandbox.Event
			if err := json.Unmarshal(bytes.TrimSpace(part), &ev); err != nil {
				return fmt.Errorf("event log %s: %w", l.path, err)
			}
			part = part[:0]
			if err := fn(ev); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
