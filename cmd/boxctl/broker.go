package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localbroker"
	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

type brokerOptions struct {
	admin           string
	idle            time.Duration
	listen          []string
	tlsCert, tlsKey string
	adminAddr       string
	certs           string
	boxURL          string
	fromEnv         bool
	replicaDir      string
}

func newBrokerCmd(a *app) *cobra.Command {
	o := &brokerOptions{idle: localbroker.DefaultIdle}
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Serve the credential broker of this user's boxes in the foreground",
		Long: `broker holds the model keys of the user's boxes in its memory only and swaps each
box's token for the real key on the box's model requests (see up --upstream). up starts
one on demand and it runs on after up returns; this command runs one in the foreground.
Its admin API listens on a unix socket only this user reaches (--admin, default beside
the state file); it ends once no box has held a token for --idle (0: never).`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			lo := localbroker.Options{Admin: o.admin, Idle: o.idle, Logger: a.log, Listen: o.listen, TLSCert: o.tlsCert,
				TLSKey: o.tlsKey, AdminAddr: o.adminAddr, BoxURL: o.boxURL, ReplicaDir: o.replicaDir}
			if (o.tlsCert == "") != (o.tlsKey == "") {
				return usageErrorf("--tls-cert and --tls-key go together")
			}
			if (o.adminAddr == "") != (o.certs == "") {
				return usageErrorf("--admin-listen and --certs go together: an admin API on TCP takes only clients of its CA")
			}
			if o.certs != "" {
				conf, err := brokertls.ServerConfig(o.certs)
				if err != nil {
					return usageError{err}
				}
				lo.AdminTLS = conf
			}
			if o.adminAddr == "" && (o.admin == "" || lo.ReplicaDir == "") {
				s, err := a.openState()
				if err != nil {
					return err
				}
				if lo.Admin == "" {
					lo.Admin = brokerSocket(s)
				}
				if lo.ReplicaDir == "" {
					lo.ReplicaDir = filepath.Join(filepath.Dir(s.Path()), "replica")
				}
			}
			if o.fromEnv {
				lo.Upstreams = envUpstreams(os.Getenv)
				for _, u := range lo.Upstreams {
					a.log.Info("broker upstream from the environment", "upstream", u.String())
				}
			}
			return localbroker.Serve(cmd.Context(), lo)
		},
	}
	cmd.AddCommand(newBrokerCertsCmd(a), newBrokerManifestCmd(a), newBrokerImageCmd(a))
	cmd.Flags().StringVar(&o.admin, "admin", "", "the admin API's unix socket (default: broker.sock beside the state file)")
	cmd.Flags().DurationVar(&o.idle, "idle", o.idle, "end once no box has held a token this long (0: never)")
	cmd.Flags().StringSliceVar(&o.listen, "listen", nil, "also serve boxes on these addresses (host:port), e.g. one a tunnel exposes to E2B or Daytona boxes (up --broker-url)")
	cmd.Flags().StringVar(&o.tlsCert, "tls-cert", "", "serve --listen over HTTPS with this certificate (PEM)")
	cmd.Flags().StringVar(&o.tlsKey, "tls-key", "", "the key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&o.adminAddr, "admin-listen", "", "also serve the admin API on this address (host:port), over mutual TLS (--certs): a broker in a cluster")
	cmd.Flags().StringVar(&o.certs, "certs", "", "the server directory of `boxctl broker certs` (ca.crt, tls.crt, tls.key) for --admin-listen")
	cmd.Flags().StringVar(&o.boxURL, "box-url", "", "the one URL boxes reach the broker at (a Service in front of --listen); up gives it to every box")
	cmd.Flags().StringVar(&o.replicaDir, "replica-dir", "", "keep the boxes' events outside them here, past the broker's restarts (default: beside the state file; none with --admin-listen unless set)")
	cmd.Flags().BoolVar(&o.fromEnv, "upstreams-from-env", false, "register the upstreams whose keys the environment holds (TANGLE_ROUTER_URL and TANGLE_API_KEY, ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY)")
	return cmd
}

// brokerSocket is the admin socket of the user's broker, beside the state,
// or, where that path is too long for a unix socket, in a directory of the
// user's own under the temporary directory, named by a digest of it.
func brokerSocket(s *boxstate.Store) string {
	p := filepath.Join(filepath.Dir(s.Path()), "broker", "broker.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(p))
	return filepath.Join(os.TempDir(), fmt.Sprintf("boxctl-%d", os.Getuid()), hex.EncodeToString(sum[:8])+".sock")
}

// brokerIdleEnv overrides how long a broker up starts runs with no box
// holding a token (a duration).
const brokerIdleEnv = "BOXCTL_BROKER_IDLE"

// ensureBroker returns a client of the broker of v's boxes: for
// Kubernetes, the one $BOXCTL_BROKER_ADMIN names (a cluster's), else the
// user's local one, started when none runs.
func (a *app) ensureBroker(ctx context.Context, s *boxstate.Store, v vendors.Vendor) (*broker.Client, error) {
	if v != nil && v.Name() == kubernetes.Name {
		if c, err := a.remoteBroker(); c != nil || err != nil {
			return c, err
		}
	}
	return a.ensureLocalBroker(ctx, s)
}

// ensureLocalBroker returns a client of the user's broker on this machine
// (the one that also serves the egress gates), starting one.
func (a *app) ensureLocalBroker(ctx context.Context, s *boxstate.Store) (*broker.Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	idle := localbroker.DefaultIdle
	if v := os.Getenv(brokerIdleEnv); v != "" {
		if idle, err = time.ParseDuration(v); err != nil {
			return nil, usageErrorf("$%s: %v", brokerIdleEnv, err)
		}
	}
	sock := brokerSocket(s)
	return localbroker.Ensure(ctx, exe, sock, filepath.Join(filepath.Dir(sock), "broker.log"), idle)
}

// brokerAccess is the model access of rec's box on v through the user's
// broker: a token of its upstream, whose key the broker holds since the
// box was made (or again from the environment, for an upstream that
// reads its key there). A box made without a broker uses the Router of
// the environment.
func (a *app) brokerAccess(s *boxstate.Store) boxstate.AccessFunc {
	return func(ctx context.Context, v vendors.Vendor, rec *boxstate.Record) (boxstate.ModelAccess, error) {
		if rec.Upstream == "" {
			return boxstate.RouterAccess(os.Getenv)(ctx, v, rec)
		}
		bc, err := a.ensureBroker(ctx, s, v)
		if err != nil {
			return boxstate.ModelAccess{}, err
		}
		if up, ok := upstreamFromEnv(rec.Upstream, os.Getenv); ok {
			if err := bc.SetUpstream(ctx, up); err != nil {
				return boxstate.ModelAccess{}, err
			}
		}
		st, err := bc.Status(ctx)
		if err != nil {
			return boxstate.ModelAccess{}, err
		}
		if !contains(st.Upstreams, rec.Upstream) {
			return boxstate.ModelAccess{}, errors.New("the broker holds no key for upstream " + rec.Upstream +
				" any more (it was restarted): set its key in the environment and try again")
		}
		url := rec.BrokerURL
		if url == "" {
			if url, err = brokerURL(ctx, bc, v); err != nil {
				return boxstate.ModelAccess{}, err
			}
		}
		return boxstate.ModelAccess{Broker: bc, BrokerURL: url, BrokerCA: []byte(rec.BrokerCA), Upstream: rec.Upstream}, nil
	}
}

// recordGate is the gate of a confined box of the state s (boxstate
// Options.Gates): the user's broker's, where boxctl enforces the box's
// policy (Docker, a Kubernetes relay); none where the vendor does.
func (a *app) recordGate(s **boxstate.Store) boxstate.GateFunc {
	return func(ctx context.Context, v vendors.Vendor, rec *boxstate.Record) (sandbox.EgressGate, error) {
		if e, own := v.(vendors.EgressEnforcer); own && !e.EgressRules().Relay {
			return nil, nil
		}
		bc, err := a.ensureBroker(ctx, *s, v)
		if err != nil {
			return nil, err
		}
		url := rec.BrokerURL
		if url == "" {
			if url, err = brokerURL(ctx, bc, v); err != nil {
				return nil, err
			}
		}
		return a.egressGate(ctx, *s, v, url)
	}
}

// brokerURL has the broker serve v's boxes where they reach this machine;
// a broker elsewhere answers the one URL it serves boxes at.
func brokerURL(ctx context.Context, bc *broker.Client, v vendors.Vendor) (string, error) {
	if bc.Remote() {
		return bc.Listen(ctx, "")
	}
	host, err := localHost(ctx, v)
	if err != nil {
		return "", err
	}
	return bc.Listen(ctx, host)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// upstreamAccess registers up at the user's broker (starting it) and has
// the broker serve v's boxes: the model access of a new box.
func (a *app) upstreamAccess(ctx context.Context, s *boxstate.Store, v vendors.Vendor, up broker.Upstream, url string) (boxstate.ModelAccess, error) {
	bc, err := a.ensureBroker(ctx, s, v)
	if err != nil {
		return boxstate.ModelAccess{}, err
	}
	if err := bc.SetUpstream(ctx, up); err != nil {
		return boxstate.ModelAccess{}, err
	}
	if url == "" {
		if url, err = brokerURL(ctx, bc, v); err != nil {
			return boxstate.ModelAccess{}, err
		}
	}
	return boxstate.ModelAccess{Broker: bc, BrokerURL: url, Upstream: up.Name}, nil
}
