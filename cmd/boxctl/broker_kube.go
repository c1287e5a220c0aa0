package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/brokerkube"
	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/vendors/open"
)

func newBrokerCertsCmd(a *app) *cobra.Command {
	var (
		hosts []string
		ns    string
		valid time.Duration
	)
	cmd := &cobra.Command{
		Use:   "certs DIR",
		Short: "Make the mutual TLS of a broker's admin API in a cluster",
		Long: `certs makes a certificate authority of your own in DIR (its key in DIR/ca.key), the
broker's server certificate in DIR/server and boxctl's client certificate in DIR/client,
each directory as a Kubernetes TLS Secret holds it (ca.crt, tls.crt, tls.key):

  kubectl -n NS create secret generic boxctl-broker-tls --from-file=DIR/server
  export BOXCTL_BROKER_CERTS=DIR/client

The server certificate names the admin Service in --namespace, localhost and 127.0.0.1
(for a port-forward), and every --host.`,
		Args: boxArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			all := append(brokertls.DefaultHosts(ns, brokerkube.AdminName), hosts...)
			err := brokertls.Write(args[0], all, valid)
			if _, exists := errors.AsType[*brokertls.ExistsError](err); exists {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return a.print(map[string]string{"server": filepath.Join(args[0], brokertls.Server), "client": filepath.Join(args[0], brokertls.Client)},
				func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "server: %s\nclient: %s\n", filepath.Join(args[0], brokertls.Server), filepath.Join(args[0], brokertls.Client))
					return err
				})
		},
	}
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "more names or addresses the admin API is reached at (a load balancer's, say)")
	cmd.Flags().StringVar(&ns, "namespace", "boxctl", "the broker's namespace")
	cmd.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificates are valid")
	return cmd
}

func newBrokerManifestCmd(a *app) *cobra.Command {
	var o brokerkube.Options
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "Print the manifest that runs the broker in a Kubernetes cluster",
		Long: `manifest prints the broker's objects for kubectl apply -f -: a ServiceAccount, the
Service boxes reach (` + brokerkube.Name + `), the admin API's Service (` + brokerkube.AdminName + `, mutual TLS
on port 9443) and a Deployment of one non-root, read-only pod of --image (boxctl broker
image pushes one). The pod reads its certificates from --certs-secret (boxctl broker
certs) and, with --keys-secret, upstream keys from that Secret's variables.

Then point boxctl at it:

  export BOXCTL_BROKER_ADMIN=https://ADDRESS:9443   (the admin Service, or a port-forward)
  export BOXCTL_BROKER_CERTS=DIR/client
  export ` + open.EnvKubeBrokerService + `=NS/` + brokerkube.Name + `   (confined boxes reach its pods)`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := brokerkube.Manifest(o)
			if err != nil {
				return usageError{err}
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", "boxctl", "the namespace of every object")
	cmd.Flags().StringVar(&o.Image, "image", "", "the broker's image (required; boxctl broker image pushes one)")
	cmd.Flags().StringVar(&o.CertsSecret, "certs-secret", "boxctl-broker-tls", "the Secret of the server directory of boxctl broker certs")
	cmd.Flags().StringVar(&o.KeysSecret, "keys-secret", "", "a Secret of upstream keys as variables (TANGLE_ROUTER_URL, TANGLE_API_KEY, ANTHROPIC_API_KEY, ...)")
	return cmd
}

func newBrokerImageCmd(a *app) *cobra.Command {
	var (
		o    brokerkube.ImageOptions
		push string
	)
	cmd := &cobra.Command{
		Use:   "image --push REF",
		Short: "Push an image of this boxctl that runs the broker",
		Long: `image pushes an image holding only the boxctl binary (--binary, default this one; it
must be static, as released) and the system's CA bundle, run as user 65532, to REF with
your Docker logins, and prints its reference by digest.`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if push == "" {
				return usageErrorf("--push REF is required")
			}
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Binary = exe
			}
			if o.CABundle == "" {
				if _, err := os.Stat(systemCABundle); err == nil {
					o.CABundle = systemCABundle
				}
			}
			ref, err := brokerkube.Image(cmd.Context(), push, o)
			if _, bad := errors.AsType[*brokerkube.NotStaticError](err); bad {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return a.print(map[string]string{"image": ref}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, ref)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&push, "push", "", "the image reference to push")
	cmd.Flags().StringVar(&o.Binary, "binary", "", "a static Linux boxctl (default: this executable)")
	cmd.Flags().StringVar(&o.CABundle, "ca-bundle", "", "the PEM roots the broker trusts towards upstreams (default: "+systemCABundle+")")
	cmd.Flags().BoolVar(&o.Insecure, "insecure-registry", false, "speak plain HTTP to the registry")
	return cmd
}

// systemCABundle is Debian's and Alpine's bundle of trusted roots.
const systemCABundle = "/etc/ssl/certs/ca-certificates.crt"
