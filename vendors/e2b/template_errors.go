package e2b

import "fmt"

// TemplateBuildError reports a template build that E2B finished with status
// "error".
type TemplateBuildError struct {
	TemplateID string
	BuildID    string
	// Message is the reason E2B gave; Step the build step that failed.
	Message string
	Step    string
}

func (e *TemplateBuildError) Error() string {
	s := fmt.Sprintf("e2b template %s build %s failed", e.TemplateID, e.BuildID)
	if e.Step != "" {
		s += " at step " + e.Step
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}
