// Package sandbox is the sandbox provider: it makes a box on a vendor,
// boots the bridge inside it, and hands back an Environment that behaves
// like provider.Environment over the box's exposed port.
//
// # Configuration
//
// New takes an Options struct, as the constructors of all our own
// components do; functional options are for the clients of outside APIs
// (the E2B and Daytona clients, internal/vendorhttp). No constructor takes
// both forms. The Router's base URL has one check, CheckRouterURL, which
// boxctl's flags use too.
//
// # The create flow
//
// Provider.Create runs these steps, in order:
//
//  1. Refuse every create field the vendor cannot honour (vendors.Check),
//     an unknown harness, and a profile the provider would refuse, before
//     any vendor call.
//  2. Create the box from the image, with a finite lifetime, the run tag
//     and the owner.
//  3. Spawn box-bridge in the box with a fresh random bearer (256 bits) and
//     the router key, in that process's environment only.
//  4. Wait until /health reports the selected backend ready (a real request
//     each poll, under ReadyTimeout), failing at once if the bridge exits.
//  5. Check the version the backend reports against its pin.
//  6. Clone the workspace repository into the box's workspace, at GitRef
//     when given.
//  7. Create the provider environment at the box's endpoint.
//
// Any failure after step 2 destroys the box before the error returns, on a
// context that the caller's cancellation does not reach, with its own
// deadline. If that destroy fails, the error is a *vendors.CleanupError
// carrying the box id.
//
// # Turns
//
// Turns run through the bridge with the provider's rules (see package
// provider). A streamed turn opens with an execution.started event naming
// the declared model, and ends with the terminal result naming the model
// the harness reported serving (Event.ProviderModels); usage carries token
// counts and never a cost (the bridge's dollar figure is an estimate).
// Turn.Timeout cancels the run and ends the stream with a failed
// result naming the timeout; a cancelled context returns context.Canceled.
// An environment runs one turn at a time: a turn while another is live is a
// *provider.ConflictError of type session_busy. Destroy cancels live runs,
// then destroys the box, even when a cancel fails.
//
// # Reconnecting
//
// Environment.Reference is everything another process needs to drive the
// box again through Provider.Connect. It holds the bearer, a secret: its
// String and LogValue redact it, and only its JSON form carries it, for
// a state file the caller keeps private.
//
// # A box that vanishes
//
// With a broker that keeps a replica (broker.Options.Replica), each box's
// bridge ships its runs' events there as it stores them, and readers of a
// live run get an event once the replica holds it (200 ms at most later).
// The environment records each turn's prompt beside them. A box the
// vendor no longer has, with no destroy of the environment's, is lost
// (EventLost, *LostError): a reader of its run reads the rest from the
// replica and ends on the run's end or on DetailBoxLost. Environment.Replace
// (Provider.Replace from a reference) continues its sessions on a new box:
// each session's next turn carries its history (provider.Turn.History), the
// interrupted turns are offered, never run again by themselves, and the lost
// box's runs stay readable from the new environment. Options.AutoReplace
// does it when the next turn is sent to a lost box.
//
// # Garbage collection
//
// GC removes boxes of a vendor whose deadline passed or whose owner is gone
// (reaper.ProcessOwner, reaper.UserOwner), by label alone: it is the reaper
// of package vendors/reaper, which owns the owners, over the labels of
// vendors/boxmeta; boxctl's per-user box state reconciles with a vendor
// through the same reaper.
//
// # The SDK
//
// This package is part of boxctl's SDK: it writes nothing to a terminal
// and knows nothing of boxctl's command line. The program's own parts
// (its state file, pool keepers, inspector, renderers) live under
// cmd/boxctl/internal and build on it.
//
// # Traces, timings and events
//
// Create is a "sandbox.create" span with a child span per phase
// ("create." plus PhaseChecks, PhaseVendor, ...), taken from the global
// OpenTelemetry tracer provider (a no-op unless the program installs one);
// Environment.Timings returns the same phases with their durations.
// Destroy is a "sandbox.destroy" span. Options.OnEvent receives each box's
// lifecycle events (EventCreated, EventReady, EventTurnStarted,
// EventTurnEnded, EventDestroyed with its reason) on the goroutine that
// caused them.
//
// # Options
//
// Clients of outside APIs (the vendors, the registry and ECR clients) take
// functional options; our own components, this provider included, take
// one Options struct whose zero values mean the defaults. No constructor
// takes both forms.
package sandbox
