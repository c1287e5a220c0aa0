package dockerclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// Inspect returns everything the engine shows of a container: its raw
// inspect data followed by the raw inspect data of every exec of it the
// engine still has, and how many execs that was. The execs are those the
// container lists (the running ones) and those the engine's events name
// since the container's creation (exec_create), which the engine still
// inspects after they ended. The Go client has no raw exec inspect, so
// those are read from the API directly, over the client's own connection.
func Inspect(ctx context.Context, cli *client.Client, id string) ([]byte, int, error) {
	c, raw, err := cli.ContainerInspectWithRaw(ctx, id, true)
	if err != nil {
		return nil, 0, err
	}
	ids, err := execIDs(ctx, cli, c.ID, c.Created)
	if err != nil {
		return nil, 0, err
	}
	for _, e := range c.ExecIDs {
		if !slices.Contains(ids, e) {
			ids = append(ids, e)
		}
	}
	all := append([]byte(nil), raw...)
	n := 0
	for _, e := range ids {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/v"+cli.ClientVersion()+"/exec/"+e+"/json", nil)
		if err != nil {
			return nil, 0, err
		}
		resp, err := cli.HTTPClient().Do(req)
		if err != nil {
			return nil, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, 0, err
		case resp.StatusCode == http.StatusNotFound:
			continue // ended, and forgotten since
		case resp.StatusCode != http.StatusOK:
			return nil, 0, fmt.Errorf("GET /exec/%s/json = %d %s", e, resp.StatusCode, b)
		}
		all = append(all, b...)
		n++
	}
	return all, n, nil
}

// execIDs returns the ids of the execs the engine's events say were
// created in container id since created (RFC 3339), oldest first.
func execIDs(ctx context.Context, cli *client.Client, id, created string) ([]string, error) {
	since := "0"
	if t, err := time.Parse(time.RFC3339Nano, created); err == nil {
		since = strconv.FormatInt(t.Unix(), 10)
	}
	now := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, errs := cli.Events(ctx, events.ListOptions{Since: since, Until: fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond()),
		Filters: filters.NewArgs(filters.Arg("container", id), filters.Arg("event", string(events.ActionExecCreate)))})
	var ids []string
	for {
		select {
		case m := <-msgs:
			if e := m.Actor.Attributes["execID"]; e != "" && !slices.Contains(ids, e) {
				ids = append(ids, e)
			}
		case err := <-errs:
			if err == nil || errors.Is(err, io.EOF) {
				return ids, nil
			}
			return nil, fmt.Errorf("events of container %s: %w", id, err)
		}
	}
}
