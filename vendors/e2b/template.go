package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// This file is E2B's template build API (build system v2): create a
// template (POST /v3/templates), build it from an image in a registry with
// that registry's credentials, ECR natively (POST
// /v2/templates/{templateID}/builds/{buildID}), and follow the build's
// status and logs (GET /templates/{templateID}/builds/{buildID}/status,
// paged by logsOffset). ImportImage (image.go) is the whole publishing
// step behind vendors.ImageImporter.

// TemplateRequest asks for a new template (POST /v3/templates).
type TemplateRequest struct {
	// Name of the template, optionally with a ":tag".
	Name string `json:"name,omitempty"`
	// CPUCount of sandboxes made from it; zero means the server default.
	CPUCount int `json:"cpuCount,omitempty"`
	// MemoryMB of sandboxes made from it; zero means the server default.
	MemoryMB int `json:"memoryMB,omitempty"`
}

// TemplateBuildRef names one build of one template.
type TemplateBuildRef struct {
	TemplateID string `json:"templateID"`
	BuildID    string `json:"buildID"`
}

// Registry holds the credentials E2B uses to pull fromImage. Type is
// "registry" (Username, Password), "aws" (ECR: AWSAccessKeyID,
// AWSSecretAccessKey, AWSRegion) or "gcp" (ServiceAccountJSON).
type Registry struct {
	Type               string `json:"type"`
	Username           string `json:"username,omitempty"`
	Password           string `json:"password,omitempty"`
	AWSAccessKeyID     string `json:"awsAccessKeyId,omitempty"`
	AWSSecretAccessKey string `json:"awsSecretAccessKey,omitempty"`
	AWSRegion          string `json:"awsRegion,omitempty"`
	ServiceAccountJSON string `json:"serviceAccountJson,omitempty"`
}

// String names the registry type only: credentials never print.
func (r Registry) String() string { return "registry(" + r.Type + ")" }

// BuildStart starts a template build from a registry image
// (POST /v2/templates/{templateID}/builds/{buildID}).
type BuildStart struct {
	// FromImage is the image reference E2B pulls.
	FromImage string `json:"fromImage"`
	// FromImageRegistry holds pull credentials; nil for a public image.
	FromImageRegistry *Registry `json:"fromImageRegistry,omitempty"`
	// StartCmd runs when a sandbox from the template starts; optional.
	StartCmd string `json:"startCmd,omitempty"`
	// ReadyCmd tells E2B when the started command is ready; optional.
	ReadyCmd string `json:"readyCmd,omitempty"`
}

// Template build statuses.
const (
	BuildBuilding = "building"
	BuildWaiting  = "waiting"
	BuildReady    = "ready"
	BuildError    = "error"
)

// LogEntry is one structured build log line.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// BuildReason says why a build is in its status (reported for errors).
type BuildReason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []LogEntry `json:"logEntries,omitempty"`
}

// BuildInfo is the status of a template build.
type BuildInfo struct {
	TemplateID string       `json:"templateID"`
	BuildID    string       `json:"buildID"`
	Status     string       `json:"status"`
	Logs       []string     `json:"logs"`
	LogEntries []LogEntry   `json:"logEntries"`
	Reason     *BuildReason `json:"reason,omitempty"`
}

// CreateTemplate registers a template and returns its first build.
func (v *Vendor) CreateTemplate(ctx context.Context, req TemplateRequest) (TemplateBuildRef, error) {
	var ref TemplateBuildRef
	if err := v.do(ctx, http.MethodPost, "/v3/templates", nil, req, http.StatusAccepted, &ref); err != nil {
		return TemplateBuildRef{}, fmt.Errorf("create template: %w", err)
	}
	if ref.TemplateID == "" || ref.BuildID == "" {
		return TemplateBuildRef{}, errors.New("create template: response lacks templateID or buildID")
	}
	return ref, nil
}

// StartBuild starts the build ref from an image.
func (v *Vendor) StartBuild(ctx context.Context, ref TemplateBuildRef, start BuildStart) error {
	if start.FromImage == "" {
		return errors.New("start template build: fromImage is empty")
	}
	p := "/v2/templates/" + url.PathEscape(ref.TemplateID) + "/builds/" + url.PathEscape(ref.BuildID)
	if err := v.do(ctx, http.MethodPost, p, nil, start, http.StatusAccepted, nil); err != nil {
		return fmt.Errorf("start template build: %w", err)
	}
	return nil
}

// BuildStatus returns the build's status with the log entries from index
// logsOffset on (at most 100 per call).
func (v *Vendor) BuildStatus(ctx context.Context, ref TemplateBuildRef, logsOffset int) (BuildInfo, error) {
	p := "/templates/" + url.PathEscape(ref.TemplateID) + "/builds/" + url.PathEscape(ref.BuildID) + "/status"
	q := url.Values{"logsOffset": {strconv.Itoa(logsOffset)}}
	var info BuildInfo
	if err := v.do(ctx, http.MethodGet, p, q, nil, http.StatusOK, &info); err != nil {
		return BuildInfo{}, fmt.Errorf("template build status: %w", err)
	}
	return info, nil
}

// WaitBuild polls the build until it is ready or failed, calling onLog once
// for each log entry in order (onLog may be nil). A failed build returns a
// *TemplateBuildError; a cancelled ctx stops the wait.
func (v *Vendor) WaitBuild(ctx context.Context, ref TemplateBuildRef, onLog func(LogEntry)) (BuildInfo, error) {
	offset := 0
	t := time.NewTicker(v.o.poll)
	defer t.Stop()
	for {
		info, err := v.BuildStatus(ctx, ref, offset)
		if err != nil {
			return BuildInfo{}, err
		}
		offset += emit(info.LogEntries, onLog)
		switch info.Status {
		case BuildReady, BuildError:
			// The status call returns at most 100 entries: drain the rest.
			for tail := info; len(tail.LogEntries) > 0; {
				if tail, err = v.BuildStatus(ctx, ref, offset); err != nil {
					return BuildInfo{}, err
				}
				offset += emit(tail.LogEntries, onLog)
			}
			if info.Status == BuildError {
				e := &TemplateBuildError{TemplateID: ref.TemplateID, BuildID: ref.BuildID}
				if info.Reason != nil {
					e.Message, e.Step = info.Reason.Message, info.Reason.Step
				}
				return info, e
			}
			return info, nil
		case BuildBuilding, BuildWaiting:
		default:
			return info, fmt.Errorf("template build %s: unknown status %q", ref.BuildID, info.Status)
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("wait for template build %s: %w", ref.BuildID, ctx.Err())
		case <-t.C:
		}
	}
}

func emit(entries []LogEntry, onLog func(LogEntry)) int {
	if onLog != nil {
		for _, e := range entries {
			onLog(e)
		}
	}
	return len(entries)
}

// BuildFromImage creates a template, starts its build from an image and waits
// for it: the whole E2B publishing step. The returned ref names the template
// even when the build failed.
func (v *Vendor) BuildFromImage(ctx context.Context, req TemplateRequest, start BuildStart, onLog func(LogEntry)) (TemplateBuildRef, error) {
	ref, err := v.CreateTemplate(ctx, req)
	if err != nil {
		return TemplateBuildRef{}, err
	}
	if err := v.StartBuild(ctx, ref, start); err != nil {
		return ref, err
	}
	_, err = v.WaitBuild(ctx, ref, onLog)
	return ref, err
}

func (v *Vendor) do(ctx context.Context, method, path string, q url.Values, body any, want int, out any) error {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: method, Path: path, Query: q, Body: body, Want: want, Out: out})
	return err
}
