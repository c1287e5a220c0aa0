package harness

import (
	"maps"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// RouterKeyVar is the environment variable that carries the router key:
// the bridge reads it at start, and adapters whose generated configuration
// names a variable for the key (instead of holding the key) name this one,
// set only in the harness process's environment.
const RouterKeyVar = wire.EnvRouterKey

// Adapter drives one harness CLI.
type Adapter interface {
	// Name is the harness name used in model ids and /health
	// ("claude-code").
	Name() string
	// Key is the backend key of BRIDGE_BACKENDS and the <KEY>_BIN
	// variables ("claude").
	Key() string
	// DefaultBin is the binary looked up on PATH when <KEY>_BIN is unset.
	DefaultBin() string
	// Models lists the bare model names /v1/models advertises.
	Models() []string
	// Command builds the process of one turn.
	Command(t Turn) (Command, error)
	// NewParser returns a parser for one turn's output.
	NewParser() Parser
}

// VersionEnv is an Adapter whose `<bin> --version` (the health probe)
// runs with variables of its own, added to the probe's environment.
type VersionEnv interface {
	VersionEnv() []string
}

// Parser turns a harness's stdout lines into events.
type Parser interface {
	// Line parses one output line (without its newline) into zero or
	// more events. Lines that are not the harness's protocol are ignored.
	// The slice returned may be reused by the next call: callers read
	// it (or copy it) before that.
	Line(line []byte) []Event
	// Done reports whether the turn's terminal event (a KindEnd) has
	// been returned: the engine then gives the process a short grace
	// to exit before killing it.
	Done() bool
}

// Turn is what the engine asks an adapter to run.
type Turn struct {
	RunID string
	// Bin is the harness binary to run.
	Bin string
	// Model is the bare model ("sonnet"); "" or "default" means the
	// CLI's own default.
	Model    string
	Messages []wire.Message
	// NativeSessionID is the harness's own session id to continue; ""
	// starts a new session.
	NativeSessionID string
	// Cwd is the working directory ("" for the bridge's own).
	Cwd string
	// StateDir is a private directory for this session's harness state
	// and configuration; the engine creates it.
	StateDir string
	// Environ is the environment to start from: the bridge's own with its
	// secrets removed. Adapters strip what their harness must not inherit.
	Environ []string
	// Env is the caller's extra environment, applied before the
	// adapter's own settings (which win).
	Env map[string]string
	// RouterURL and RouterKey point the harness at the model router.
	RouterURL, RouterKey string
	Effort               string
}

// Command is how to start a turn's process.
type Command struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Stdin is written to the process's stdin, which is then closed;
	// with nil Stdin, stdin is closed at once.
	Stdin []byte
	// HoldStdin keeps stdin open after Stdin is written, until the turn's
	// terminal event was parsed or the process exited, for harnesses that
	// read commands from stdin and quit at its end (Pi's rpc mode).
	HoldStdin bool
	// Runs are other executables the process starts (a relay's harness):
	// a jail shows them as it shows Path.
	Runs []string
	// Files are written before the process starts: configuration the
	// adapter generated for this turn (see WriteFiles).
	Files []File
	// Parser, when not nil, parses this turn's output instead of a parser
	// from Adapter.NewParser: one that needs to know the turn, such as a
	// usage baseline an earlier turn left in the session's state.
	Parser Parser
}

// Diagnoser is implemented by parsers that can say why a turn never
// ended: the engine adds Diagnosis to the error of a turn it stopped at
// its deadline or for silence ("" when there is nothing to add).
type Diagnoser interface {
	Diagnosis() string
}

// EventKind says what an Event carries.
type EventKind int

// Event kinds.
const (
	// KindText is assistant text (Text).
	KindText EventKind = iota + 1
	// KindReasoning is thinking text (Text).
	KindReasoning
	// KindToolCall is a tool call or a fragment of its arguments (ToolCall).
	KindToolCall
	// KindToolResult is the result of a tool the harness ran (ToolResult).
	KindToolResult
	// KindSession reports the harness's own session id (NativeSessionID).
	KindSession
	// KindProviderModel reports a model the model API itself said served
	// a request (ProviderModel).
	KindProviderModel
	// KindEnd ends the turn: Finish and Usage, or Err.
	KindEnd
)

// Event is one harness-neutral thing a harness said.
type Event struct {
	Kind            EventKind
	Text            string
	ToolCall        *wire.ToolCall
	ToolResult      *wire.ToolResult
	NativeSessionID string
	ProviderModel   string
	// Finish is the finish reason of a KindEnd (wire.Finish...).
	Finish string
	// Usage is measured usage of a KindEnd, nil when the harness did not
	// report it.
	Usage *wire.Usage
	// Err makes a KindEnd a failed turn.
	Err *wire.ErrorBody
}

// Prompt flattens message content to text: a string, or the text parts of
// an array; other parts are dropped.
func Prompt(content []byte) string {
	return wire.ContentText(content)
}

// MergeEnv returns base with every variable whose name drop reports true
// removed, then the pairs of each overlay in order (later wins), an
// overlay's sorted by name so that the result is the same every time.
func MergeEnv(base []string, drop func(name string) bool, overlays ...map[string]string) []string {
	out := make([]string, 0, len(base)+8)
	seen := map[string]int{}
	add := func(k, v string) {
		if i, ok := seen[k]; ok {
			out[i] = k + "=" + v
			return
		}
		seen[k] = len(out)
		out = append(out, k+"="+v)
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || (drop != nil && drop(k)) {
			continue
		}
		add(k, v)
	}
	for _, o := range overlays {
		for _, k := range slices.Sorted(maps.Keys(o)) {
			add(k, o[k])
		}
	}
	return out
}
