package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Inputs past the contract's bounds, as harnesses really produce them: a
// long answer, a file written through a tool, a command's long output.
var (
	longText = strings.Repeat("a", 20_000)
	// Fills the second text part but for one code unit, which the emoji
	// needs two of: it starts the third.
	astralText    = strings.Repeat("b", zMaxString-1-(len(longText)-zMaxString)) + "😀c"
	longReasoning = strings.Repeat("r", 2*zMaxString+5)
	longOutput    = strings.Repeat("o", 30_000)
	longName      = " " + strings.Repeat("n", 600) + " "
	// A Write call whose content is past the string bound: kept, cut.
	bigWrite = `{"file_path":"/w/a.txt","content":"` + strings.Repeat("x", 20_000) + `"}`
	// Arguments whose shape is past the bounds: kept as their text, cut.
	wideArgs = `{"ids":[` + strings.TrimSuffix(strings.Repeat("1,", 2_000), ",") + `]}`
	longKey  = `{"` + strings.Repeat("k", 600) + `":1}`
	manyKeys = func() string {
		m := map[string]int{}
		for i := range 300 {
			m["k"+strconv.Itoa(i)] = i
		}
		b, _ := json.Marshal(m)
		return string(b)
	}()
)

// boundsScenario is a turn whose every value is at or past a bound.
func boundsScenario() canonicalScenario {
	run := testRun("run-bounds")
	steps := []canonicalStep{
		status("started", ""),
		text(longText),
		text(astralText),
		think(longReasoning),
		call(0, " call-1 ", longName, bigWrite),
		result(" call-1 ", longOutput, false),
		call(1, "call-2", "Bulk", wideArgs),
		result("call-2", longOutput, true),
		call(2, "call-3", "Keys", longKey),
		call(3, "call-4", "Map", manyKeys),
		call(4, "toolu_5", "Write", ""),
		fragment(4, bigWrite[:zMaxString+100]),
		fragment(4, bigWrite[zMaxString+100:]),
		call(5, strings.Repeat("c", 600), "\ufeffBash\u2028", `{}`),
		ask(harness.Question{Kind: "permission", Tool: "Bulk", Input: json.RawMessage(wideArgs)}, "perm-1", run),
		ask(harness.Question{Kind: "permission", Tool: "Keys", Input: json.RawMessage(longKey)}, "perm-2", run),
		ask(harness.Question{Kind: "permission", Tool: "\ufeffBash", Input: json.RawMessage(`{}`)}, "perm-3", run),
		ask(harness.Question{Kind: "permission", Tool: "Map", Input: json.RawMessage(manyKeys), Title: strings.Repeat("t", 20_000)}, "perm-4", run),
	}
	for i := range 1_100 {
		steps = append(steps, on(harness.Event{Kind: harness.KindProviderModel, ProviderModel: fmt.Sprintf("model-%d", i)}))
	}
	steps = append(steps, endWith(harness.Event{Err: &wire.ErrorBody{Type: wire.TypeHarnessError, Message: "stderr: " + longOutput}}))
	return canonicalScenario{name: "bounds", run: run, backend: "claude", steps: steps}
}

// TestCanonical_frames runs every frame of every scenario through the
// mirror of the agent interface's envelope schema. With -frames it also
// writes them, for the interface's own validator.
func TestCanonical_frames(t *testing.T) {
	var all []json.RawMessage
	for _, sc := range append(canonicalScenarios(), boundsScenario()) {
		t.Run(sc.name, func(t *testing.T) {
			for i, f := range play(t, sc) {
				all = append(all, f)
				if err := checkEnvelope(f); err != nil {
					t.Errorf("frame %d rejected: %v\n%s", i+1, err, abbreviate(f))
				}
			}
		})
	}
	if *framesOut != "" {
		var b strings.Builder
		b.WriteString("[\n")
		for i, f := range all {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.Write(f)
		}
		b.WriteString("\n]\n")
		if err := os.WriteFile(*framesOut, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// decoded is one frame's event, decoded loosely for the tests' questions.
type decoded struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
	Code  string `json:"code"`
	Part  struct {
		ID     string  `json:"id"`
		Type   string  `json:"type"`
		Text   string  `json:"text"`
		Tool   string  `json:"tool"`
		CallID *string `json:"callID"`
		State  struct {
			Status string         `json:"status"`
			Input  map[string]any `json:"input"`
			Output *string        `json:"output"`
			Error  string         `json:"error"`
			Raw    *string        `json:"raw"`
		} `json:"state"`
	} `json:"part"`
	Status  string          `json:"status"`
	Detail  string          `json:"detail"`
	Request json.RawMessage `json:"request"`
	Event   struct {
		ProviderModels []string `json:"providerModels"`
	} `json:"event"`
}

func decodeAll(t *testing.T, frames [][]byte) []decoded {
	t.Helper()
	var out []decoded
	for _, f := range frames {
		var env wire.Envelope
		var ev decoded
		if err := json.Unmarshal(f, &env); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(env.Event, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestCanonical_bounds checks what the encoder does with values past the
// contract's bounds: text is split across parts without losing a
// character, and what must be cut is cut on a character boundary and
// announced by a warning.
func TestCanonical_bounds(t *testing.T) {
	evs := decodeAll(t, play(t, boundsScenario()))
	var texts, deltas strings.Builder
	parts := map[string]string{} // part id -> its deltas
	var order []string
	warnings := map[string]int{}
	tools := map[string]decoded{} // part id -> its last update
	var requests []wire.InteractionRequest
	var models []string
	var detail string
	for _, ev := range evs {
		switch ev.Type {
		case "message.part.updated":
			switch ev.Part.Type {
			case "text", "reasoning":
				if _, ok := parts[ev.Part.ID]; !ok {
					order = append(order, ev.Part.ID)
				}
				parts[ev.Part.ID] += ev.Delta
				if got := parts[ev.Part.ID]; got != ev.Part.Text {
					t.Fatalf("part %s: text is not its deltas (%d vs %d characters)", ev.Part.ID, len(ev.Part.Text), len(got))
				}
				if ev.Part.Type == "text" {
					deltas.WriteString(ev.Delta)
				}
			case "tool":
				tools[ev.Part.ID] = ev
			}
		case "warning":
			warnings[ev.Code]++
		case "interaction":
			var ir wire.InteractionRequest
			if err := json.Unmarshal(ev.Request, &ir); err != nil {
				t.Fatal(err)
			}
			requests = append(requests, ir)
		case "raw":
			models = ev.Event.ProviderModels
		case "status":
			detail = ev.Detail
		}
	}
	texts.WriteString(longText + astralText)
	if deltas.String() != texts.String() {
		t.Errorf("text deltas lost characters: %d of %d", len(deltas.String()), len(texts.String()))
	}
	var kinds []string
	for _, id := range order {
		kinds = append(kinds, fmt.Sprintf("%s %d", id, zLen(parts[id])))
	}
	wantKinds := []string{
		"run-bounds:text:1 16384", "run-bounds:text:2 16383", "run-bounds:text:3 3",
		"run-bounds:reasoning:4 16384", "run-bounds:reasoning:5 16384", "run-bounds:reasoning:6 5",
	}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("text and reasoning parts (-want +got):\n%s", diff)
	}

	type toolView struct {
		Tool, CallID, Status string
		Input                string
		Output, Error        int
	}
	var gotTools []toolView
	for i := 7; i <= 12; i++ {
		ev, ok := tools["run-bounds:tool:"+strconv.Itoa(i)]
		if !ok {
			t.Fatalf("no tool part %d", i)
		}
		v := toolView{Tool: ev.Part.Tool, Status: ev.Part.State.Status, Error: zLen(ev.Part.State.Error)}
		if len(v.Tool) > 20 {
			v.Tool = v.Tool[:10] + "..." + strconv.Itoa(zLen(v.Tool))
		}
		if ev.Part.CallID != nil {
			v.CallID = *ev.Part.CallID
			if len(v.CallID) > 20 {
				v.CallID = "..." + strconv.Itoa(zLen(v.CallID))
			}
		}
		if ev.Part.State.Output != nil {
			v.Output = zLen(*ev.Part.State.Output)
		}
		v.Input = strings.Join(slices.Sorted(maps.Keys(ev.Part.State.Input)), ",")
		gotTools = append(gotTools, v)
	}
	wantTools := []toolView{
		{Tool: "nnnnnnnnnn...512", CallID: "call-1", Status: "completed", Input: "content,file_path", Output: zMaxString},
		{Tool: "Bulk", CallID: "call-2", Status: "error", Input: "arguments", Error: zMaxString},
		{Tool: "Keys", CallID: "call-3", Status: "running", Input: "arguments"},
		{Tool: "Map", CallID: "call-4", Status: "running", Input: "arguments"},
		{Tool: "Write", CallID: "toolu_5", Status: "running", Input: "content,file_path"},
		{Tool: "Bash", CallID: "...512", Status: "running", Input: ""},
	}
	if diff := cmp.Diff(wantTools, gotTools); diff != "" {
		t.Errorf("tool parts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"truncated": 7}, warnings); diff != "" {
		t.Errorf("warnings by code (-want +got):\n%s", diff)
	}

	var subjects []string
	for _, ir := range requests {
		s := "none"
		if ir.Subject != nil {
			s = ir.Subject.ToolName + " " + strconv.Itoa(len(ir.Subject.Input))
		}
		subjects = append(subjects, fmt.Sprintf("%s title %d subject %s", ir.ID, zLen(ir.Title), s))
	}
	wantSubjects := []string{"perm-1 title 11 subject Bulk 0", "perm-2 title 11 subject Keys 0", "perm-3 title 12 subject none",
		"perm-4 title 16384 subject Map 0"}
	if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
		t.Errorf("interaction subjects (-want +got):\n%s", diff)
	}
	if len(models) != zMaxArray || models[0] != "model-0" {
		t.Errorf("providerModels: %d, first %q; want the first %d", len(models), models[0], zMaxArray)
	}
	if n := zLen(detail); n != zMaxString || !strings.HasSuffix(detail, "…") {
		t.Errorf("failed status detail: %d characters ending %q, want %d ending in an ellipsis", n, detail[len(detail)-5:], zMaxString)
	}
}
