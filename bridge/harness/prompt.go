package harness

import (
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// SplitPrompt returns the prompt and the system text of a turn for a
// harness that takes one prompt per turn. System and developer messages
// are joined into the system text. A continued native session gets only
// the last user message (the harness holds the rest); a new session whose
// request carries earlier messages gets them as a transcript before it.
// The prompt is "" when the turn has no user message.
func SplitPrompt(t Turn) (prompt, system string) {
	var sys []string
	var convo []wire.Message
	for _, m := range t.Messages {
		if m.Role == "system" || m.Role == "developer" {
			if s := wire.ContentText(m.Content); s != "" {
				sys = append(sys, s)
			}
			continue
		}
		convo = append(convo, m)
	}
	last := -1
	for i := len(convo) - 1; i >= 0; i-- {
		if convo[i].Role == "user" {
			last = i
			break
		}
	}
	if last < 0 {
		return "", strings.Join(sys, "\n\n")
	}
	prompt = wire.ContentText(convo[last].Content)
	if t.NativeSessionID == "" && last > 0 {
		var b strings.Builder
		b.WriteString("<previous_conversation>\n")
		for _, m := range convo[:last] {
			fmt.Fprintf(&b, "%s: %s\n", m.Role, wire.ContentText(m.Content))
		}
		b.WriteString("</previous_conversation>\n\n")
		b.WriteString(prompt)
		prompt = b.String()
	}
	return prompt, strings.Join(sys, "\n\n")
}
