package routerstub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// End returns when an endpoint that runs until a time (until: RFC 3339 or
// Unix seconds) or for a lifetime from now exits by itself, or the zero
// time when neither is given.
func End(until string, lifetime time.Duration, now time.Time) (time.Time, error) {
	switch {
	case until != "" && lifetime != 0:
		return time.Time{}, errors.New("until and lifetime exclude each other")
	case lifetime < 0:
		return time.Time{}, fmt.Errorf("lifetime %v: want a positive duration", lifetime)
	case lifetime > 0:
		return now.Add(lifetime), nil
	case until == "":
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(until, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, until)
	if err != nil {
		return time.Time{}, fmt.Errorf("until %q: want RFC 3339 (2006-01-02T15:04:05Z) or Unix seconds", until)
	}
	return t, nil
}

// ServeUntil is Serve until ctx ends or, when end is not the zero time,
// until end; it reports whether it stopped because end passed.
func (s *Server) ServeUntil(ctx context.Context, l net.Listener, end time.Time) (bool, error) {
	if !end.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	}
	err := s.Serve(ctx, l)
	return err == nil && !end.IsZero() && !time.Now().Before(end), err
}
