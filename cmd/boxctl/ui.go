package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/inspector"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
	"github.com/tangle-network/boxctl/vendors/open"
)

// uiOptions are the flags of `boxctl ui`.
type uiOptions struct {
	addr, jaegerURL string
	poolMetrics     []string
	poolTargets     []string
}

func newUICmd(a *app, runF func(context.Context, *uiOptions) error) *cobra.Command {
	o := &uiOptions{addr: "127.0.0.1:0"}
	cmd := &cobra.Command{Use: "ui", Short: "Serve a local web inspector of the boxes",
		Long: `ui serves a web page of the boxes the state knows, on every vendor (turns streamed,
replayed, sent, cancelled, permission prompts, the bridge's log, events, traces,
suspend, resume, destroy; the pools) on loopback unless --addr says otherwise. Open the URL it prints once.`,
		Example: `  boxctl ui --addr 127.0.0.1:7681 --jaeger-url http://127.0.0.1:16686`,
		Args:    boxArgs(cobra.NoArgs), RunE: verbRunE(a, o, func([]string) error { return nil }, runF, runUI)}
	cmd.Flags().StringVar(&o.addr, "addr", o.addr, "address to listen on (port 0: any free one)")
	cmd.Flags().StringVar(&o.jaegerURL, "jaeger-url", "", "Jaeger query API whose spans the trace view shows")
	cmd.Flags().StringSliceVar(&o.poolMetrics, "pool-metrics", nil, "pool keepers' --metrics addresses whose size, claims and hits the pool page shows")
	cmd.Flags().StringSliceVar(&o.poolTargets, "pool-targets", nil, "targets whose vendors keep their own warm pools for the pool page to list (default: kubernetes when KUBECONFIG is set)")
	return cmd
}

func runUI(ctx context.Context, a *app, o *uiOptions) error {
	s, err := a.openState()
	if err != nil {
		return err
	}
	vs := open.NewSet(open.Options{Logger: a.log})
	defer func() { _ = vs.Close() }()
	srv, err := inspector.New(inspector.Options{Store: s, Logger: a.log, JaegerURL: o.jaegerURL, Vendor: vs.Opener(),
		KeeperMetrics: o.poolMetrics, PoolTargets: o.targetsOfPools(), Access: a.brokerAccess(s)})
	if err != nil {
		return usageError{err}
	}
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		return usageErrorf("--addr %s: %v", o.addr, err)
	}
	fmt.Fprintln(a.out, srv.URL(l.Addr()))
	return srv.Serve(ctx, l)
}

// targetsOfPools is --pool-targets, by default kubernetes where a cluster
// is configured.
func (o *uiOptions) targetsOfPools() []string {
	if o.poolTargets == nil && os.Getenv("KUBECONFIG") != "" {
		return []string{kubernetes.Name}
	}
	return o.poolTargets
}
