package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

// routerKeyEnv is read for the key when --key is not given, so the key
// need not appear in the process list.
const routerKeyEnv = "BOXCTL_ROUTER_KEY"

type routerStubOptions struct {
	addr        string
	key         string
	noAuth      bool
	reply       string
	servedModel string
	until       string        // RFC 3339 or Unix seconds
	lifetime    time.Duration // from the start
}

func newRouterStubCmd(a *app) *cobra.Command {
	o := routerStubOptions{addr: "127.0.0.1:0", reply: "OK"}
	cmd := &cobra.Command{
		Use:   "router-stub",
		Short: "Serve a local model endpoint that answers with a scripted reply",
		Long: `router-stub serves a stand-in for the model Router: the Anthropic Messages API
(/v1/messages), the OpenAI Responses API (/v1/responses, /responses) and OpenAI
Chat Completions (/v1/chat/completions), streaming or not. Every request gets
--reply as text. Requests must carry the key (x-api-key or Authorization:
Bearer) unless --no-auth is given. It prints its URL and runs until
interrupted, or until --until or for --lifetime; requests are logged at
debug level, without the key.`,
		Example: `  BOXCTL_ROUTER_KEY=secret boxctl router-stub --addr 127.0.0.1:8787 --reply "hello"
  boxctl router-stub --no-auth -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.key == "" {
				o.key = os.Getenv(routerKeyEnv)
			}
			return runRouterStub(cmd.Context(), a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", o.addr, "address to listen on, host:port (port 0 picks a free one)")
	f.StringVar(&o.key, "key", "", "the key requests must present (default $"+routerKeyEnv+")")
	f.BoolVar(&o.noAuth, "no-auth", false, "accept requests with any key or none")
	f.StringVar(&o.reply, "reply", o.reply, "the text every model request is answered with")
	f.StringVar(&o.servedModel, "served-model", "", "model name answers report (default: the requested model)")
	f.StringVar(&o.until, "until", "", "exit at this time, RFC 3339 or Unix seconds (default: run until interrupted)")
	f.DurationVar(&o.lifetime, "lifetime", 0, "exit this long after the start (default: run until interrupted)")
	return cmd
}

// routerStubListening is what router-stub prints once it listens.
type routerStubListening struct {
	Addr string `json:"addr"`
	URL  string `json:"url"`
}

func runRouterStub(ctx context.Context, a *app, o routerStubOptions) error {
	switch {
	case o.key == "" && !o.noAuth:
		return usageErrorf("a key is required: --key or $%s (or --no-auth)", routerKeyEnv)
	case o.key != "" && o.noAuth:
		return usageErrorf("--key and --no-auth exclude each other")
	}
	end, err := routerstub.End(o.until, o.lifetime, time.Now())
	if err != nil {
		return usageError{err}
	}
	script := routerstub.NewQueue(routerstub.Text(o.reply)).Side(routerstub.Text(o.reply))
	opts := routerstub.Options{Script: script, Logger: a.log, NoAuth: o.noAuth, ServedModel: o.servedModel}
	if !o.noAuth {
		opts.Keys = []string{o.key}
	}
	srv, err := routerstub.New(opts)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return usageErrorf("listen on --addr %q: %w", o.addr, err)
	}
	addr := l.Addr().String()
	out := routerStubListening{Addr: addr, URL: "http://" + addr}
	if err := a.print(out, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, out.URL)
		return err
	}); err != nil {
		_ = l.Close()
		return err
	}
	a.log.Info("model endpoint listening", "url", out.URL, "auth", !o.noAuth)
	over, err := srv.ServeUntil(ctx, l, end)
	if over {
		a.log.Info("model endpoint lifetime over", "until", end.Format(time.RFC3339))
	}
	return err
}
