package boximage

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// ErrBuildkitUnreachable means no BuildKit answered where the build looked
// for one: the buildkitd address, or the Docker engine.
var ErrBuildkitUnreachable = errors.New("buildkitd is unreachable")

// BuildkitError is a BuildKit that could not be reached. It matches
// ErrBuildkitUnreachable with errors.Is.
type BuildkitError struct {
	// Addr is the buildkitd address tried, or the Docker engine's.
	Addr string
	// Engine reports that Addr is a Docker engine whose own BuildKit the
	// build asked for.
	Engine bool
	// Route is how the engine's BuildKit was asked for (RouteEngineGRPC,
	// RouteEngineHijack), when the engine answered at all.
	Route string
	// Err is the cause.
	Err error
}

func (e *BuildkitError) Error() string {
	if e.Engine {
		what := "is unreachable"
		if e.Route != "" {
			what = "answers, but its BuildKit (" + e.Route + " route) does not"
		}
		return fmt.Sprintf("the Docker engine at %s %s: %s: start Docker there (DOCKER_HOST, --docker-host), "+
			"or point --buildkit-addr or BUILDKIT_HOST at a buildkitd", e.Addr, what, dialCause(e.Err))
	}
	return fmt.Sprintf("buildkitd at %s is unreachable: %s: start buildkitd there, "+
		"or point --buildkit-addr or BUILDKIT_HOST at a running one", e.Addr, dialCause(e.Err))
}

// Unwrap returns the cause.
func (e *BuildkitError) Unwrap() error { return e.Err }

// Is makes the error match ErrBuildkitUnreachable.
func (e *BuildkitError) Is(target error) bool { return target == ErrBuildkitUnreachable }

// What a Docker engine's own BuildKit cannot do without the containerd
// image store (EngineError.Feature).
const (
	FeatureCacheExport   = "a cache export (--cache-to)"
	FeatureMultiPlatform = "a multi-platform image"
	FeatureOCIExport     = "an OCI or Docker tarball export"
)

// ErrEngineUnsupported means the build asks of a Docker engine's own
// BuildKit what an engine without the containerd image store cannot do.
var ErrEngineUnsupported = errors.New("the Docker engine's BuildKit cannot do this")

// EngineError is a build that the Docker engine's BuildKit cannot run as
// asked, refused before it starts. It matches ErrEngineUnsupported with
// errors.Is.
type EngineError struct {
	// Host is the engine's address.
	Host string
	// Feature is what the engine cannot do: FeatureCacheExport,
	// FeatureMultiPlatform or FeatureOCIExport.
	Feature string
}

func (e *EngineError) Error() string {
	return fmt.Sprintf("the Docker engine at %s keeps images in its classic store, so its BuildKit cannot make %s: "+
		"enable the containerd image store in the engine, or build with a buildkitd "+
		"(--buildkit-addr or BUILDKIT_HOST: unix://, tcp://, docker-container://NAME, kube-pod://NAME)", e.Host, e.Feature)
}

// Is makes the error match ErrEngineUnsupported.
func (e *EngineError) Is(target error) bool { return target == ErrEngineUnsupported }

// dialCause shortens gRPC's nested connection error to its dial error
// ("dial unix /x.sock: connect: no such file or directory") when it has one.
func dialCause(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "dial "); i >= 0 {
		return strings.TrimRight(s[i:], `"`)
	}
	return s
}

// ErrPushDenied means a registry refused a push for want of credentials or
// permission (HTTP 401 or 403, or a DENIED or UNAUTHORIZED error code).
var ErrPushDenied = errors.New("registry refused the push")

// PushError is a push a registry did not take. It matches ErrPushDenied
// with errors.Is when the registry refused the credentials.
type PushError struct {
	// Reference is the image reference pushed to.
	Reference string
	// Registry is the registry host.
	Registry string
	// Status is the HTTP status, when known.
	Status int
	// Message is what the registry (or BuildKit relaying it) said, with
	// every credential of the push removed.
	Message string
	// Err is the cause; its text may hold what Message has redacted, so
	// it is for errors.As, not for printing.
	Err error
}

func (e *PushError) Error() string {
	status := ""
	if e.Status != 0 {
		status = fmt.Sprintf(" (HTTP %d %s)", e.Status, http.StatusText(e.Status))
	}
	if e.denied() {
		return fmt.Sprintf("push %s: the registry refused it%s: %s: log in with `docker login %s` or fix its "+
			"credentials (for ECR, the AWS credentials and their permission to push to the repository)",
			e.Reference, status, e.Message, e.Registry)
	}
	return fmt.Sprintf("push %s failed%s: %s: check that the registry %s is up and takes pushes",
		e.Reference, status, e.Message, e.Registry)
}

// Unwrap returns the cause.
func (e *PushError) Unwrap() error { return e.Err }

// Is makes a refusal of the credentials match ErrPushDenied.
func (e *PushError) Is(target error) bool { return target == ErrPushDenied && e.denied() }

var deniedRE = regexp.MustCompile(`(?i)\b(denied|unauthorized|forbidden|authentication required)\b`)

func (e *PushError) denied() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Status == 0 && deniedRE.MatchString(e.Message)
}

// redact removes every secret from s; empty secrets are skipped.
func redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// ErrIntegrity means a build step found a download whose hash is not the
// pinned one (npm's EINTEGRITY, or sha512sum's check of Node and npm).
var ErrIntegrity = errors.New("integrity check failed")

// StepError is a failed build step with the end of its output. It matches
// ErrIntegrity with errors.Is when the output reports a hash mismatch.
type StepError struct {
	// Step is the step's name as BuildKit shows it ("[3/9] RUN ...").
	Step string
	// Log holds the step's output lines that explain the failure: npm's
	// error lines when there are any, else its last lines.
	Log []string
	// Err is BuildKit's error.
	Err error
}

func (e *StepError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %s: %v", e.Step, e.Err)
	for _, l := range e.Log {
		b.WriteString("\n  | ")
		b.WriteString(l)
	}
	if e.Is(ErrIntegrity) {
		b.WriteString("\nthe registry served a tarball whose hash is not the pinned one: " +
			"run `boxctl pins verify` to see which pin disagrees")
	}
	return b.String()
}

// Unwrap returns BuildKit's error.
func (e *StepError) Unwrap() error { return e.Err }

// Is makes a hash mismatch in the log match ErrIntegrity.
func (e *StepError) Is(target error) bool {
	if target != ErrIntegrity {
		return false
	}
	for _, l := range e.Log {
		if strings.Contains(l, "EINTEGRITY") || strings.Contains(l, "integrity checksum failed") ||
			strings.Contains(l, "sha512sum: WARNING") || strings.HasSuffix(l, ": FAILED") {
			return true
		}
	}
	return false
}
