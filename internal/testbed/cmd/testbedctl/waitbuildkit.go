package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	bkclient "github.com/moby/buildkit/client"
)

func waitBuildkit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait-buildkit", flag.ContinueOnError)
	addr := fs.String("addr", "", "buildkitd address, unix:///path")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return fmt.Errorf("wait-buildkit needs -addr: %w", flag.ErrHelp)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var last error
	for {
		if last = pingBuildkit(ctx, *addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("buildkitd at %s did not answer within %s: %w", *addr, *timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pingBuildkit asks buildkitd for its workers, with a short deadline per try.
func pingBuildkit(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := bkclient.New(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	ws, err := c.ListWorkers(ctx)
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		return errors.New("no workers")
	}
	return nil
}
