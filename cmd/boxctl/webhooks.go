package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
)

// webhookSecretEnv holds the secret that signs the deliveries to every
// webhook (up --webhook): an environment variable, never a flag.
const webhookSecretEnv = "BOXCTL_WEBHOOK_SECRET"

// webhookWait bounds how long a command that recorded events goes on
// delivering them before it exits (one attempt each); what is left waits
// in the outbox.
const webhookWait = 5 * time.Second

// webhookSecret reads and checks the secret; "" when it is not set.
func webhookSecret(getenv func(string) string) (string, error) {
	secret := getenv(webhookSecretEnv)
	if secret == "" {
		return "", nil
	}
	if err := webhook.CheckSecret(secret); err != nil {
		return "", usageErrorf("$%s: %v", webhookSecretEnv, err)
	}
	return secret, nil
}

// checkWebhooks checks up's --webhook URLs and that their secret is set.
func checkWebhooks(urls []string, getenv func(string) string) error {
	if len(urls) == 0 {
		return nil
	}
	secret, err := webhookSecret(getenv)
	if err != nil {
		return err
	}
	if secret == "" {
		return usageErrorf("--webhook needs the secret that signs the deliveries in $%s (make one with `boxctl webhooks secret`)", webhookSecretEnv)
	}
	for _, u := range urls {
		if err := webhook.CheckURL(u); err != nil {
			return usageErrorf("--webhook %s: %v", webhook.Redact(u), err)
		}
	}
	return nil
}

type webhooksOptions struct {
	follow  bool
	wait    time.Duration
	metrics string
	// dueOnly makes only the attempts due now, not the retries after them
	// (a command's delivery before it exits).
	dueOnly bool
}

func newWebhooksCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Show the delivery of the boxes' lifecycle events to their webhooks",
		Long: `webhooks prints, by endpoint, the deliveries of lifecycle events to the boxes'
webhooks (up --webhook): pending, delivered, abandoned, attempts, the oldest
pending event and the last error. Endpoints are named by scheme and host only.

Each event is POSTed as JSON, signed as Standard Webhooks sign (webhook-id,
webhook-timestamp and webhook-signature headers; HMAC-SHA256 with the secret in
$` + webhookSecretEnv + `), and retried with back-off until a 2xx answer, for up
to 72h. The deliveries wait in an outbox beside the state file: every boxctl
command that records events makes the attempts that are due before it exits
(for up to 5s, when the secret is set), and ` + "`boxctl webhooks drain`" + ` delivers the rest,
retries included (-f: until interrupted; run it as a service for timely retries).`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.openState()
			if err != nil {
				return err
			}
			st, err := webhook.ReadState(cmd.Context(), s.WebhooksPath())
			if err != nil {
				return err
			}
			if st == nil {
				st = []webhook.EndpointState{}
			}
			return a.print(st, func(w io.Writer) error { return printWebhooks(w, st) })
		},
	}
	o := &webhooksOptions{wait: time.Minute}
	drain := &cobra.Command{
		Use:   "drain",
		Short: "Deliver the pending webhook deliveries",
		Long: `drain delivers the outbox's pending deliveries, signed with $` + webhookSecretEnv + `, until
none is pending or --wait passes; with -f it goes on, delivering what any boxctl
process records, until interrupted. --metrics serves its counts at /metrics.`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.openState()
			if err != nil {
				return err
			}
			secret, err := webhookSecret(os.Getenv)
			if err != nil {
				return err
			}
			if secret == "" {
				return usageErrorf("drain needs the secret that signs the deliveries in $%s", webhookSecretEnv)
			}
			return a.drainWebhooks(cmd.Context(), s, secret, o)
		},
	}
	drain.Flags().BoolVarP(&o.follow, "follow", "f", false, "go on delivering until interrupted")
	drain.Flags().DurationVar(&o.wait, "wait", o.wait, "without -f, give up after this long (what is left stays pending)")
	drain.Flags().StringVar(&o.metrics, "metrics", "", "serve the delivery counts at http://ADDR/metrics (Prometheus text)")
	secret := &cobra.Command{
		Use:   "secret",
		Short: "Print a new random webhook secret",
		Long:  `secret prints a new secret for $` + webhookSecretEnv + ` (whsec_ and 32 random bytes in base64); give it to the receivers too.`,
		Args:  boxArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.out, webhook.NewSecret())
			return err
		},
	}
	cmd.AddCommand(drain, secret)
	return cmd
}

func printWebhooks(w io.Writer, st []webhook.EndpointState) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tPENDING\tDELIVERED\tABANDONED\tATTEMPTS\tOLDEST PENDING\tLAST ERROR")
	for _, e := range st {
		oldest := "-"
		if !e.OldestPending.IsZero() {
			oldest = time.Since(e.OldestPending).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", e.URL, e.Pending, e.Delivered, e.Abandoned, e.Attempts, oldest, e.LastError)
	}
	return tw.Flush()
}

// drainWebhooks delivers the outbox's pending deliveries (see drain).
func (a *app) drainWebhooks(ctx context.Context, s *boxstate.Store, secret string, o *webhooksOptions) error {
	var (
		stopMetrics func()
		current     atomic.Pointer[webhook.Sender] // what /metrics reads
	)
	defer func() {
		if stopMetrics != nil {
			stopMetrics()
		}
	}()
	for {
		urls, err := webhook.PendingURLs(ctx, s.WebhooksPath())
		if err != nil {
			return err
		}
		if len(urls) == 0 && !o.follow {
			return nil
		}
		eps := make([]webhook.Endpoint, len(urls))
		for i, u := range urls {
			eps[i] = webhook.Endpoint{URL: u, Secret: secret}
		}
		var snd *webhook.Sender
		if len(eps) > 0 {
			if snd, err = webhook.Open(ctx, webhook.Options{Path: s.WebhooksPath(), Endpoints: eps, Logger: a.log}); err != nil {
				return err
			}
			current.Store(snd)
			if o.metrics != "" && stopMetrics == nil {
				if stopMetrics, err = pool.ServeMetrics(o.metrics, metricsOf(&current)); err != nil {
					snd.Close(ctx)
					return err
				}
				a.log.Info("metrics", "url", "http://"+o.metrics+"/metrics")
			}
		}
		if !o.follow {
			wctx, cancel := context.WithTimeout(ctx, o.wait)
			var ferr error
			if !o.dueOnly {
				ferr = snd.Flush(wctx)
			}
			cerr := snd.Close(wctx)
			cancel()
			if errors.Is(ferr, context.DeadlineExceeded) || errors.Is(cerr, context.DeadlineExceeded) {
				a.log.Warn("webhook deliveries still pending: they wait in the outbox", "wait", o.wait)
				return nil
			}
			return errors.Join(ferr, cerr)
		}
		// -f: deliver until interrupted, and take up the endpoints of boxes
		// made meanwhile.
		err = a.followWebhooks(ctx, s, urls)
		if snd != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			snd.Close(cctx)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the end of a follow
			}
			return err
		}
	}
}

// followWebhooks returns when the outbox has a pending delivery to an
// endpoint not in urls, or ctx ends.
func (a *app) followWebhooks(ctx context.Context, s *boxstate.Store, urls []string) error {
	tick := time.NewTicker(webhook.DefaultPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now, err := webhook.PendingURLs(ctx, s.WebhooksPath())
		if err != nil {
			return err
		}
		for _, u := range now {
			if !slices.Contains(urls, u) {
				return nil
			}
		}
	}
}

// metricsOf serves the metrics of the current Sender at GET /metrics.
func metricsOf(current *atomic.Pointer[webhook.Sender]) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		current.Load().Metrics().ServeHTTP(w, r)
	})
	return mux
}

// recordsEvents are the commands whose lifecycle events go to webhooks.
var recordsEvents = []string{"up", "turn", "exec", "logs", "rm", "gc", "suspend", "resume"}

// deliverQueuedWebhooks is what every command that records events
// (recordsEvents) does before it exits: with the secret set, attempt the
// outbox's due deliveries, for up to webhookWait; the retries wait for the
// next such command or for webhooks drain.
func (a *app) deliverQueuedWebhooks(cmd *cobra.Command) {
	if cmd.Parent() != cmd.Root() || !slices.Contains(recordsEvents, cmd.Name()) {
		return
	}
	ctx := cmd.Context()
	secret, err := webhookSecret(os.Getenv)
	if err != nil || secret == "" {
		return
	}
	s, err := a.openState()
	if err != nil {
		return
	}
	if _, err := os.Stat(s.WebhooksPath()); err != nil {
		return
	}
	if err := a.drainWebhooks(ctx, s, secret, &webhooksOptions{wait: webhookWait, dueOnly: true}); err != nil {
		a.log.Warn("webhook deliveries", "err", err)
	}
}
