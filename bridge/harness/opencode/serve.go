package opencode

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/harness"
)

var (
	_ harness.Conversant      = Adapter{}
	_ harness.QuestionClaimer = Adapter{}
)

// The ids of the requests a conversation sends through the relay; the
// parser ends the turn at an error answer to one of them.
const (
	idSession      = "boxctl-session"
	idPromptPrefix = "boxctl-prompt-"
	idReplyPrefix  = "boxctl-reply-"
	idAbortPrefix  = "boxctl-abort-"
)

// ClaimsInteractions reports true: a retained turn runs through `opencode
// serve`, whose permission requests (permission.asked) reach the caller
// as interactions (TestLive_OpencodePermissionInteraction).
func (Adapter) ClaimsInteractions() bool { return true }

// target is the provider and model of a turn.
func target(model string) (provider, name string, err error) {
	if model == "" || strings.EqualFold(model, "default") {
		return "", "", fmt.Errorf("opencode: no model (use a model id opencode/<provider>/<model>)")
	}
	provider, name, ok := strings.Cut(model, "/")
	if !ok {
		provider, name = RouterProvider, model
	}
	if provider == "" || name == "" {
		return "", "", fmt.Errorf("opencode: model %q is not provider/model", model)
	}
	return provider, name, nil
}

// SessionCommand builds the long-lived process of a retained session:
// the bridge's own executable as the relay (RunRelay) of `opencode serve`,
// driven by the process's conversation. Its configuration is Command's,
// with every tool that can change something asking first.
func (Adapter) SessionCommand(t harness.Turn) (harness.Command, error) {
	provider, model, err := target(t.Model)
	if err != nil {
		return harness.Command{}, err
	}
	if t.StateDir == "" {
		return harness.Command{}, fmt.Errorf("opencode: the turn has no state directory")
	}
	exe, err := os.Executable()
	if err != nil {
		return harness.Command{}, fmt.Errorf("opencode: the relay needs the bridge's executable: %w", err)
	}
	config := filepath.Join(t.StateDir, "opencode.json")
	plugin := filepath.Join(t.StateDir, PluginFile)
	files := []harness.File{
		{Path: plugin, Data: servedModelPlugin},
		{Path: config, Data: serveConfigJSON(t.RouterURL, provider, model, plugin)},
	}
	return harness.Command{Path: exe, Args: []string{RelayArg, t.Bin}, Runs: []string{t.Bin}, Env: Env(t, config), Dir: t.Cwd,
		Stdin: []byte{}, HoldStdin: true, Files: files}, nil
}

// serveConfigJSON is configJSON with the tools that write, run or fetch
// asking for permission.
func serveConfigJSON(routerURL, provider, model, plugin string) []byte {
	var doc map[string]any
	json.Unmarshal(configJSON(routerURL, provider, model, plugin), &doc)
	doc["permission"] = map[string]string{"bash": "ask", "edit": "ask", "webfetch": "ask"}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// RetainedCommand builds the process of one retained turn run in a
// process of its own: SessionCommand's, for its one turn.
func (a Adapter) RetainedCommand(t harness.Turn) (harness.Command, error) {
	if _, err := servePrompt(t); err != nil {
		return harness.Command{}, err
	}
	return a.SessionCommand(t)
}

// TurnInput encodes the prompt of turn t in the session
// t.NativeSessionID; the engine starts turns through the process's
// conversation, which knows the session a new process created.
func (Adapter) TurnInput(t harness.Turn) ([]byte, error) {
	if t.NativeSessionID == "" {
		return nil, fmt.Errorf("opencode: a prompt needs the opencode session id")
	}
	c := &conversation{session: t.NativeSessionID}
	return c.TurnInput(t)
}

// Interrupt returns nil: the abort names the session, which the process's
// conversation knows (its Interrupt).
func (Adapter) Interrupt() []byte { return nil }

// NewConversation returns the conversation of a process started for t:
// one that continues t.NativeSessionID when set, and otherwise creates a
// session.
func (Adapter) NewConversation(t harness.Turn) harness.Conversation {
	return &conversation{session: t.NativeSessionID}
}

// conversation is the client side of one relayed `opencode serve`.
type conversation struct {
	// session is opencode's session id, once known.
	session string
	// prompt is a turn's request held until the session exists.
	prompt   *harness.Turn
	prompted bool
	// busy marks that the session went busy after the running turn's
	// prompt: the server's events before that (an aborted turn's last
	// ones) are not the turn's.
	busy  bool
	turns int
}

// relayLine encodes a request line of the relay.
func relayLine(id, method, path string, body any) []byte {
	r := relayRequest{ID: id, Method: method, Path: path}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil
		}
		r.Body = b
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// Open creates the session, unless the process continues one.
func (c *conversation) Open() []byte {
	if c.session != "" {
		return nil
	}
	return relayLine(idSession, "POST", "/session", map[string]string{"title": "bridge session"})
}

// TurnInput returns the prompt of turn t, or nil until the session exists.
func (c *conversation) TurnInput(t harness.Turn) ([]byte, error) {
	if _, err := servePrompt(t); err != nil {
		return nil, err
	}
	if _, _, err := target(t.Model); err != nil {
		return nil, err
	}
	c.turns++
	c.prompted, c.busy = false, false
	c.prompt = &t
	return c.flush(), nil
}

func (c *conversation) flush() []byte {
	if c.session == "" || c.prompt == nil {
		return nil
	}
	t := *c.prompt
	c.prompt, c.prompted = nil, true
	text, _ := servePrompt(t)
	provider, model, _ := target(t.Model)
	body := map[string]any{
		"parts": []map[string]string{{"type": "text", "text": text}},
		"model": map[string]string{"providerID": provider, "modelID": model},
	}
	if t.Effort != "" {
		body["variant"] = t.Effort
	}
	return relayLine(idPromptPrefix+strconv.Itoa(c.turns), "POST", "/session/"+url.PathEscape(c.session)+"/prompt_async", body)
}

// serveLine is the part of a relay line a conversation reads.
type serveLine struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Status     int             `json:"status"`
	Body       json.RawMessage `json:"body"`
	Properties struct {
		Status struct {
			Type string `json:"type"`
		} `json:"status"`
	} `json:"properties"`
}

// Reply takes the created session's id from its answer and writes the
// held prompt. Server events are the turn's from the session's going busy
// after its prompt on: those before are an earlier turn's.
func (c *conversation) Reply(line []byte) ([]byte, bool) {
	var l serveLine
	if json.Unmarshal(line, &l) != nil {
		return nil, false
	}
	switch l.Type {
	case ResponseType:
		if l.ID == idSession && l.Status/100 == 2 {
			var s struct {
				ID string `json:"id"`
			}
			json.Unmarshal(l.Body, &s)
			c.session = s.ID
			return c.flush(), true
		}
		return nil, true
	case ReadyType, "server.connected", "server.heartbeat":
		return nil, false
	case ServedModelType:
		return nil, true
	case "session.status":
		if c.prompted && l.Properties.Status.Type == "busy" {
			c.busy = true
		}
	}
	return nil, c.prompted && c.busy
}

// Interrupt aborts the session's running turn; nil before its prompt was
// written.
func (c *conversation) Interrupt() []byte {
	if !c.prompted {
		return nil
	}
	return relayLine(idAbortPrefix+strconv.Itoa(c.turns), "POST", "/session/"+url.PathEscape(c.session)+"/abort", nil)
}

// permissionAsked is a permission.asked event.
type permissionAsked struct {
	Type       string `json:"type"`
	Properties struct {
		ID         string          `json:"id"`
		SessionID  string          `json:"sessionID"`
		Permission string          `json:"permission"`
		Patterns   []string        `json:"patterns"`
		Metadata   json.RawMessage `json:"metadata"`
		Tool       *struct {
			CallID string `json:"callID"`
		} `json:"tool"`
	} `json:"properties"`
}

// ParseQuestion decodes a permission.asked event: a tool opencode waits
// to run until the request is replied to. The tool is the permission's
// name (bash, edit, webfetch); its input is the request's metadata, and
// the title names the patterns asked for (the command, for bash).
func (Adapter) ParseQuestion(line []byte) (harness.Question, bool) {
	if !strings.Contains(string(line), `"permission.asked"`) {
		return harness.Question{}, false
	}
	var p permissionAsked
	if err := json.Unmarshal(line, &p); err != nil || p.Type != "permission.asked" || p.Properties.ID == "" {
		return harness.Question{}, false
	}
	pr := p.Properties
	input := json.RawMessage(`{}`)
	if m := strings.TrimSpace(string(pr.Metadata)); strings.HasPrefix(m, "{") {
		input = pr.Metadata
	}
	title := "Allow " + pr.Permission + "?"
	if len(pr.Patterns) > 0 {
		title = fmt.Sprintf("Allow %s: %s", pr.Permission, strings.Join(pr.Patterns, ", "))
	}
	return harness.Question{NativeID: pr.ID, Kind: "permission", Tool: pr.Permission, Input: input, Title: title}, true
}

// Answer replies to a permission request: once to allow, reject with the
// message to refuse.
func (Adapter) Answer(q harness.Question, allow bool, message string) ([]byte, error) {
	if q.NativeID == "" {
		return nil, fmt.Errorf("opencode: a permission reply needs the request id")
	}
	body := map[string]string{"reply": "reject"}
	if allow {
		body["reply"] = "once"
	} else if message != "" {
		body["message"] = message
	}
	return relayLine(idReplyPrefix+q.NativeID, "POST", "/permission/"+url.PathEscape(q.NativeID)+"/reply", body), nil
}

// servePrompt is the prompt of a turn, its system text in a <system>
// block before it.
func servePrompt(t harness.Turn) (string, error) {
	prompt, system := harness.SplitPrompt(t)
	if strings.TrimSpace(prompt) == "" {
		return "", fmt.Errorf("opencode: the turn has no user message text")
	}
	if system != "" {
		prompt = "<system>\n" + system + "\n</system>\n\n" + prompt
	}
	return prompt, nil
}
