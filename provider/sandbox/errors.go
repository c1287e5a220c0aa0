package sandbox

import (
	"errors"
	"fmt"
	"time"
)

// ErrBridgeExited is matched by a *BridgeExitError.
var ErrBridgeExited = errors.New("bridge exited")

// ErrNotReady is matched by a *NotReadyError.
var ErrNotReady = errors.New("bridge backend not ready")

// ErrPinMismatch is matched by a *PinMismatchError.
var ErrPinMismatch = errors.New("harness version does not match its pin")

// BridgeExitError is a bridge that ended before it was ready.
type BridgeExitError struct {
	ExitCode int
	// Log is the tail of what the bridge printed.
	Log string
}

func (e *BridgeExitError) Error() string {
	msg := fmt.Sprintf("box-bridge exited with status %d before it was ready", e.ExitCode)
	if e.Log != "" {
		msg += ": " + e.Log
	}
	return msg
}

// Is reports ErrBridgeExited.
func (e *BridgeExitError) Is(target error) bool { return target == ErrBridgeExited }

// NotReadyError is a backend that did not report ready in time.
type NotReadyError struct {
	Backend string
	Timeout time.Duration
	// Last is the last state seen ("" when /health never answered) and
	// Detail the bridge's reason; Probe is why the last GET /health got
	// no answer, when it got none.
	Last, Detail, Probe string
}

func (e *NotReadyError) Error() string {
	if e.Last == "" {
		msg := fmt.Sprintf("bridge did not answer /health within %v", e.Timeout)
		if e.Probe != "" {
			msg += " (last attempt: " + e.Probe + ")"
		}
		return msg
	}
	msg := fmt.Sprintf("backend %s was %s, not ready, after %v", e.Backend, e.Last, e.Timeout)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is reports ErrNotReady.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// PinMismatchError is a harness whose version in the box differs from its
// pin.
type PinMismatchError struct {
	Harness string
	// Pinned is the pinned version; Reported what the box's harness said.
	Pinned, Reported string
}

func (e *PinMismatchError) Error() string {
	return fmt.Sprintf("harness %s in the box reports version %q; the pin is %s", e.Harness, e.Reported, e.Pinned)
}

// Is reports ErrPinMismatch.
func (e *PinMismatchError) Is(target error) bool { return target == ErrPinMismatch }

// CloneError is a workspace clone that failed.
type CloneError struct {
	// Repo is the repository URL without credentials.
	Repo, GitRef string
	// Message is git's own message, without credentials.
	Message string
}

func (e *CloneError) Error() string {
	ref := ""
	if e.GitRef != "" {
		ref = " at " + e.GitRef
	}
	return fmt.Sprintf("clone %s%s: %s", e.Repo, ref, e.Message)
}

// ErrBridgeCrashLoop is matched by a *BridgeCrashLoopError.
var ErrBridgeCrashLoop = errors.New("bridge crash loop")

// BridgeCrashLoopError is a box whose bridge kept crashing: its
// supervisor no longer restarts it and answers every request with 503
// (GET /health reports wire.HealthCrashLoop; a call of the environment
// gets a *provider.BridgeError of Type wire.TypeBridgeCrashLoop).
type BridgeCrashLoopError struct {
	// Detail is the supervisor's reason: the crashes and the last exit.
	Detail string
}

func (e *BridgeCrashLoopError) Error() string { return "box-bridge crash loop: " + e.Detail }

// Is reports ErrBridgeCrashLoop.
func (e *BridgeCrashLoopError) Is(target error) bool { return target == ErrBridgeCrashLoop }
