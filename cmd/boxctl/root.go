package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/internal/buildinfo"
)

// app carries what every command shares: IO streams, the output format and
// the logger. Data goes to out, progress and logs to errOut.
type app struct {
	out, errOut io.Writer
	output      string // text or json
	logLevel    string
	log         *slog.Logger
	// remote is the client of the cluster's broker, once made
	// (remoteBroker).
	remote *broker.Client
}

func newApp(out, errOut io.Writer) *app {
	return &app{out: out, errOut: errOut, output: "text", logLevel: "info",
		log: slog.New(slog.NewTextHandler(errOut, nil))}
}

// jsonOutput reports whether --output json was asked for.
func (a *app) jsonOutput() bool { return a.output == "json" }

// print writes v as indented JSON with --output json, or calls text.
func (a *app) print(v any, text func(w io.Writer) error) error {
	if a.jsonOutput() {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(a.out)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "boxctl",
		Short: "Run coding-agent CLIs in finite-lifetime boxes behind one durable HTTP contract",
		Long: `boxctl builds pinned box images for coding-agent CLIs (Claude Code, Codex, Pi,
opencode, Gemini CLI), runs agent turns in boxes on Docker, E2B or Daytona,
and proves with a conformance suite that a built image still works.`,
		Version:       buildinfo.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: false,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch a.output {
			case "text", "json":
			default:
				return usageErrorf("--output %q: want text or json", a.output)
			}
			level, err := parseLevel(a.logLevel)
			if err != nil {
				return usageError{err}
			}
			a.log = slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: level}))
			return nil
		},
		PersistentPostRun: func(cmd *cobra.Command, _ []string) { a.deliverQueuedWebhooks(cmd) },
	}
	root.SetOut(a.out)
	root.SetErr(a.errOut)
	root.SetVersionTemplate("boxctl {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVarP(&a.output, "output", "o", a.output, "output format: text or json")
	pf.StringVar(&a.logLevel, "log-level", a.logLevel, "log level: debug, info, warn or error")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(newVersionCmd(a))
	root.AddCommand(newBridgeCmd(a))
	root.AddCommand(newRouterStubCmd(a))
	root.AddCommand(newBrokerCmd(a))
	root.AddCommand(newBuildCmd(a))
	root.AddCommand(newPinsCmd(a))
	root.AddCommand(newUpCmd(a, nil))
	root.AddCommand(newTurnCmd(a, nil))
	root.AddCommand(newExecCmd(a, nil))
	root.AddCommand(newLogsCmd(a, nil))
	root.AddCommand(newLsCmd(a, nil))
	root.AddCommand(newNetCmd(a, nil))
	root.AddCommand(newRmCmd(a, nil))
	root.AddCommand(newSuspendCmds(a)...)
	root.AddCommand(newGCCmd(a, nil))
	root.AddCommand(newEventsCmd(a, nil))
	root.AddCommand(newWebhooksCmd(a))
	root.AddCommand(newUICmd(a, nil))
	root.AddCommand(newConformanceCmd(a, nil))
	root.AddCommand(newBenchCmd(a, nil))
	root.AddCommand(newEmulateCmd(a))
	root.AddCommand(newPoolCmd(a))
	return root
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit boxctl was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi := buildinfo.Get()
			return a.print(bi, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "boxctl %s\n", strings.TrimSpace(bi.String()))
				return err
			})
		},
	}
}
