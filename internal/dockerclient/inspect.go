package dockerclient

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/docker/docker/client"
)

// Inspect returns everything the engine shows of a container: its raw
// inspect data followed by the raw inspect data of every exec the engine
// still lists for it, and how many execs that was. The Go client has no
// raw exec inspect, so those are read from the API directly, over the
// client's own connection.
func Inspect(ctx context.Context, cli *client.Client, id string) ([]byte, int, error) {
	c, raw, err := cli.ContainerInspectWithRaw(ctx, id, true)
	if err != nil {
		return nil, 0, err
	}
	all := append([]byte(nil), raw...)
	for _, e := range c.ExecIDs {
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
		if err != nil {
			return nil, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("GET /exec/%s/json = %d %s", e, resp.StatusCode, b)
		}
		all = append(all, b...)
	}
	return all, len(c.ExecIDs), nil
}
