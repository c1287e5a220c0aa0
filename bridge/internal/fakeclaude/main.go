// Command fakeclaude is a scripted stand-in for the Claude Code CLI, used by
// the bridge's tests to inject faults a real CLI cannot be made to produce
// on demand. It speaks `-p --output-format stream-json`: the prompt (last
// argument, or a stream-json user line on stdin) picks the scenario:
//
//	hello          init, message_start, two text deltas, result (success)
//	many:N         N text deltas as fast as possible, then result
//	slow:N:MS      N text deltas MS milliseconds apart, then result
//	crash          some text, a stderr line echoing ANTHROPIC_AUTH_TOKEN, exit 3
//	stall          init, then silence forever
//	hang-after-result  a normal turn, then silence forever
//	is-error       result with subtype success but is_error true
//	graceful       some text, then waits; on SIGTERM ends its turn with an
//	               error result ("interrupted") and exits 143, as an
//	               interrupted CLI does
//	stubborn       ignores SIGTERM, spawns a child (also stubborn) and stalls;
//	               writes "<pid> <childpid>" to $FAKE_PIDFILE
//	echo-env       replies with the names of its CLAUDE*/ANTHROPIC* variables
//	write:PATH     writes PATH; replies "ok" or "fail: <error>" (so do the
//	               next three), for the tests of jailed execution
//	read:PATH      reads PATH
//	dial:ADDR      opens a TCP connection to ADDR (host:port)
//	model          POSTs to $ANTHROPIC_BASE_URL/v1/messages; replies
//	               "ok <status> <body>"
//	orphan         starts a child in a session of its own (out of reach of
//	               a kill of the harness's group) that holds stdout open
//	               and sleeps; writes the child's pid to $FAKE_PIDFILE; then
//	               a normal turn, and exits
//	whoami         replies with its session id (--session-id or --resume)
//	history        replies with the previous conversation the prompt
//	               carried before it (<previous_conversation>), or "none"
//	               (any scenario may follow such a transcript)
//	pid            replies "pid=<its pid> session=<its session id>"
//	bash:CMD       in a retained turn (--permission-prompt-tool stdio), asks
//	               permission to run CMD (control_request can_use_tool), waits
//	               for the control_response, then runs it with sh -c and
//	               replies "ran: <output>", or replies "denied: <message>"
//
// A session process (--input-format stream-json with
// --permission-prompt-tool stdio) serves one turn per user line read from
// stdin, as Claude Code does, until stdin closes; a scenario that stalls
// (stall, stubborn) hangs the turn and the process with it.
//
// `--version` prints "9.9.9 (Claude Code)". With $FAKE_ARGS_FILE set it
// writes its arguments there, one per line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("9.9.9 (Claude Code)")
		return
	}
	if os.Getenv("FAKE_CHILD") == "1" {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return
	}
	if f := os.Getenv("FAKE_ARGS_FILE"); f != "" {
		os.WriteFile(f, []byte(strings.Join(args, "\n")), 0o600)
	}
	prompt := ""
	stdinJSON, retained := false, false
	for i, a := range args {
		if a == "--input-format" && i+1 < len(args) && args[i+1] == "stream-json" {
			stdinJSON = true
		}
		if a == "--permission-prompt-tool" && i+1 < len(args) && args[i+1] == "stdio" {
			retained = true
		}
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	// userLine reads stdin up to the next user line and returns its text.
	userLine := func() (string, bool) {
		for sc.Scan() {
			var l struct {
				Type    string
				Message struct{ Content []struct{ Text string } }
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "user" && len(l.Message.Content) > 0 {
				return l.Message.Content[0].Text, true
			}
		}
		return "", false
	}
	session := "00000000-0000-4000-8000-000000000000"
	for i, a := range args {
		if (a == "--session-id" || a == "--resume") && i+1 < len(args) {
			session = args[i+1]
		}
	}
	switch {
	case stdinJSON && retained:
		// A session process: stdin stays open between turns and for
		// permission answers.
		for {
			p, ok := userLine()
			if !ok {
				return
			}
			turn(p, session, retained, sc)
		}
	case stdinJSON:
		// The prompt is the last user line.
		for {
			p, ok := userLine()
			if !ok {
				break
			}
			prompt = p
		}
	case len(args) > 0:
		prompt = args[len(args)-1]
	}
	turn(prompt, session, retained, sc)
}

// turn answers one prompt on stdout; sc is stdin, for permission answers.
func turn(prompt, session string, retained bool, sc *bufio.Scanner) {
	r := &reply{out: bufio.NewWriter(os.Stdout), session: session}
	r.emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "requested-model"})
	if prompt == "stall" {
		time.Sleep(time.Hour)
		return
	}
	r.emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_start",
		"message": map[string]any{"id": "msg_1", "model": "fake-model-1", "usage": map[string]any{"input_tokens": 12}}}})
	history := "none"
	const tag, end = "<previous_conversation>\n", "</previous_conversation>\n\n"
	if i := strings.Index(prompt, end); strings.HasPrefix(prompt, tag) && i >= 0 {
		history, prompt = prompt[len(tag):i], prompt[i+len(end):]
	}
	scenario, arg, _ := strings.Cut(prompt, ":")
	switch scenario {
	case "history":
		r.text(history)
		r.result(false, history)
	case "many", "slow":
		r.stream(scenario, arg)
	case "crash", "graceful", "hang-after-result", "is-error":
		r.misbehave(scenario)
	case "stubborn", "orphan":
		r.leaveChild(scenario)
	case "whoami":
		r.text(session)
		r.result(false, session)
	case "pid":
		msg := fmt.Sprintf("pid=%d session=%s", os.Getpid(), session)
		r.text(msg)
		r.result(false, msg)
	case "bash":
		r.bash(arg, retained, sc)
	case "write", "read", "dial", "model":
		msg := probe(scenario, arg)
		r.text(msg)
		r.result(false, msg)
	case "echo-env":
		r.echoEnv()
	default:
		r.text("Hello")
		r.text(", world")
		r.result(false, "Hello, world")
	}
}

// reply writes the stream-json lines of one turn of a session.
type reply struct {
	out     *bufio.Writer
	session string
}

// emit writes v as a line.
func (r *reply) emit(v any) {
	b, _ := json.Marshal(v)
	r.out.Write(append(b, '\n'))
	r.out.Flush()
}

// text writes a text delta.
func (r *reply) text(s string) {
	r.emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": s}}})
}

// result writes the turn's result line.
func (r *reply) result(isError bool, res string) {
	r.emit(map[string]any{"type": "result", "subtype": "success", "is_error": isError, "result": res,
		"stop_reason": "end_turn", "session_id": r.session, "terminal_reason": map[bool]string{true: "api_error"}[isError],
		"usage": map[string]any{"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 0}})
}

// stream writes the text deltas of many:N (as fast as it can) or
// slow:N:MS (MS milliseconds apart), then the result.
func (r *reply) stream(scenario, arg string) {
	ns, ms, _ := strings.Cut(arg, ":")
	n, _ := strconv.Atoi(ns)
	d, _ := strconv.Atoi(ms)
	for i := 0; i < n; i++ {
		r.text(fmt.Sprintf("d%d ", i))
		if scenario == "slow" {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
	}
	r.result(false, "")
}

// misbehave ends the turn as a failing CLI does: crash, graceful,
// hang-after-result or is-error.
func (r *reply) misbehave(scenario string) {
	switch scenario {
	case "crash":
		r.text("partial")
		fmt.Fprintf(os.Stderr, "fatal: lost connection (token %s)\n", os.Getenv("ANTHROPIC_AUTH_TOKEN"))
		os.Exit(3)
	case "graceful":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		r.text("working")
		<-term
		r.result(true, "interrupted")
		os.Exit(143)
	case "hang-after-result":
		r.text("done")
		r.result(false, "done")
		time.Sleep(time.Hour)
	case "is-error":
		r.result(true, "API Error: 529 overloaded")
		os.Exit(1)
	}
}

// leaveChild starts a child the harness's kill must reach (stubborn: in
// its group, ignoring SIGTERM as the harness does, which then stalls) or
// cannot (orphan: in a session of its own, holding stdout open, after
// which the turn ends normally), and writes the pids to $FAKE_PIDFILE.
func (r *reply) leaveChild(scenario string) {
	var child *exec.Cmd
	if scenario == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
		child = exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "FAKE_CHILD=1")
	} else {
		child = exec.Command("sleep", "3600")
		child.Stdout = os.Stdout
		child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pids := strconv.Itoa(child.Process.Pid)
	if scenario == "stubborn" {
		pids = fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)
	}
	if f := os.Getenv("FAKE_PIDFILE"); f != "" {
		os.WriteFile(f, []byte(pids), 0o600)
	}
	if scenario == "stubborn" {
		r.text("working")
		time.Sleep(time.Hour)
	}
	r.text("done")
	r.result(false, "done")
}

// bash asks permission to run cmd as a Bash command (retained turns),
// waits for the answer on stdin (sc), then runs it or reports the
// refusal.
func (r *reply) bash(cmd string, retained bool, sc *bufio.Scanner) {
	if !retained {
		r.text("no permission prompt tool")
		r.result(true, "no permission prompt tool")
		os.Exit(1)
	}
	r.emit(map[string]any{"type": "control_request", "request_id": "req-1", "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": cmd}}})
	for sc.Scan() {
		var l struct {
			Type     string
			Response struct {
				RequestID string `json:"request_id"`
				Response  struct{ Behavior, Message string }
			}
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Type != "control_response" || l.Response.RequestID != "req-1" {
			continue
		}
		if l.Response.Response.Behavior == "allow" {
			b, err := exec.Command("sh", "-c", cmd).CombinedOutput()
			r.text(fmt.Sprintf("ran: %s (err %v)", strings.TrimSpace(string(b)), err))
		} else {
			r.text("denied: " + l.Response.Response.Message)
		}
		r.result(false, "")
		return
	}
	os.Exit(4) // stdin closed without an answer
}

// echoEnv replies with the names of its CLAUDE*, ANTHROPIC*, BRIDGE* and
// TANGLE* variables.
func (r *reply) echoEnv() {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CLAUDE") || strings.HasPrefix(k, "ANTHROPIC") || strings.HasPrefix(k, "BRIDGE") || strings.HasPrefix(k, "TANGLE") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	r.text(strings.Join(names, ","))
	r.result(false, "")
}

// probe does what a write, read, dial or model prompt asks and says how it
// went.
func probe(action, arg string) string {
	var err error
	switch action {
	case "write":
		err = os.WriteFile(arg, []byte("written by a harness\n"), 0o644)
	case "read":
		_, err = os.ReadFile(arg)
	case "dial":
		var c net.Conn
		if c, err = net.DialTimeout("tcp", arg, 10*time.Second); err == nil {
			c.Close()
		}
	case "model":
		var resp *http.Response
		req, _ := http.NewRequest(http.MethodPost, os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if k := os.Getenv("ANTHROPIC_AUTH_TOKEN"); k != "" {
			req.Header.Set("Authorization", "Bearer "+k) // as Claude Code presents it
		}
		resp, err = http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Sprintf("ok %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	if err != nil {
		return "fail: " + err.Error()
	}
	return "ok"
}
