package openapi

import (
	"net/http"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// sse marks an event-stream response.
type sse struct{}

// text marks a plain-text response (the Prometheus exposition).
type text struct{}

// route is one operation: its request body (nil: none), query
// parameters, its answers by HTTP status (several bodies: any of them)
// and the headers of its successful answers.
type route struct {
	method, path, summary string
	query                 []string
	body                  any
	answers               map[int][]any
	headers               []string
}

var (
	errBody    = wire.ErrorResponse{}
	runHeaders = []string{wire.HeaderRunID, wire.HeaderRunRequestDigest, wire.HeaderRunProvider, wire.HeaderRunEnvironmentID,
		wire.HeaderRunSessionID, wire.HeaderRunExecutionID}
	snapHeaders = []string{wire.HeaderRunStatus, wire.HeaderRunState, wire.HeaderRunTerminal}
)

// with returns answers with errBody added at each of statuses.
func with(answers map[int][]any, statuses ...int) map[int][]any {
	for _, s := range statuses {
		answers[s] = append(answers[s], errBody)
	}
	return answers
}

// routes are the bridge's operations. Every route but GET /health also
// answers 401 without the bearer, 500 on a fault of the bridge and 503
// (bridge_standby) while the bridge waits in a pool.
func routes() []route {
	var all []route
	for _, group := range []func() []route{serviceRoutes, runRoutes, sessionRoutes, catalogRoutes, branchRoutes, exactRoutes} {
		all = append(all, group()...)
	}
	return all
}

// ack is answers of v at each of statuses.
func ack(v any, statuses ...int) map[int][]any {
	m := map[int][]any{}
	for _, s := range statuses {
		m[s] = []any{v}
	}
	return m
}

// serviceRoutes are the operations of the bridge itself: its
// description, readiness, claim, metrics, models and capabilities.
func serviceRoutes() []route {
	return []route{
		{method: "GET", path: "/", summary: "Bridge name, version, scheme, capabilities, backends and endpoints",
			answers: ack(wire.Root{}, 200)},
		{method: "GET", path: "/health", summary: "Readiness of each registered harness", query: []string{"force"},
			answers: ack(wire.Health{}, 200, 503)},
		{method: "POST", path: wire.PathClaim, summary: "Claim a pooled bridge with its pool token: the bearer, Router, env and deadline in one request",
			body: wire.Claim{}, answers: with(ack(wire.Claimed{}, 200), 400, 409, 413)},
		{method: "GET", path: "/metrics", summary: "Prometheus metrics", answers: ack(text{}, 200)},
		{method: "GET", path: "/v1/models", summary: "Model ids of the ready backends", answers: ack(wire.ModelList{}, 200)},
		{method: "GET", path: "/v1/capabilities", summary: "Capability document of a model", query: []string{"model"},
			answers: with(ack(wire.Capabilities{}, 200), 400, 404, 503)},
	}
}

// runRoutes are the operations of chat completions and the runs they start.
func runRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/chat/completions", summary: "OpenAI-compatible chat completion; streams with stream:true",
			body: wire.ChatRequest{}, answers: with(map[int][]any{200: {wire.Completion{}, sse{}}}, 400, 404, 409, 410, 413, 429, 501, 503),
			headers: append([]string{wire.HeaderBridgeMode}, runHeaders...)},
		{method: "GET", path: "/v1/runs/{id}", summary: "Run snapshot; wait_ms long-polls for a terminal state",
			query: []string{"wait_ms"}, answers: with(ack(wire.RunSnapshot{}, 200), 400, 404), headers: snapHeaders},
		{method: "GET", path: "/v1/runs/{id}/events", summary: "Replay and follow a run's events",
			answers: with(ack(sse{}, 200), 400, 404, 409, 410)},
		{method: "POST", path: "/v1/runs/{id}/cancel", summary: "Cancel a run; with a body, an exact, idempotent cancellation",
			query: []string{"wait_ms"}, body: wire.CancellationRequest{},
			answers: with(map[int][]any{200: {wire.CancelResponse{}, wire.CancellationAck{}}, 202: {wire.CancelResponse{}, wire.CancellationAck{}},
				409: {wire.CancellationAck{}}}, 400, 404, 409, 413)},
		{method: "POST", path: "/v1/runs/{id}/interactions/{iid}/respond", summary: "Answer an interaction of a run",
			body: wire.InteractionCommand{}, answers: with(ack(wire.InteractionAck{}, 200, 400, 404, 409, 502), 400, 413)},
	}
}

// sessionRoutes are the operations of retained native sessions and their turns.
func sessionRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/sessions", summary: "Create a retained native session", body: wire.SessionCreateRequest{},
			answers: with(ack(wire.SessionView{}, 200, 201), 400, 404, 409, 413, 501)},
		{method: "GET", path: "/v1/sessions", summary: "List retained sessions", answers: ack(wire.SessionList{}, 200)},
		{method: "GET", path: "/v1/sessions/{id}", summary: "Retained session view", answers: with(ack(wire.SessionView{}, 200), 400, 404)},
		{method: "DELETE", path: "/v1/sessions/{id}", summary: "Forget the harness session a chat session resumes",
			query: []string{"backend"}, answers: with(ack(wire.SessionDelete{}, 200), 400, 409)},
		{method: "GET", path: "/v1/sessions/{id}/status", summary: "Retained session view",
			answers: with(ack(wire.SessionView{}, 200), 400, 404)},
		{method: "GET", path: "/v1/sessions/{id}/transcript", summary: "A session's retained events folded into messages",
			answers: with(ack(wire.Transcript{}, 200), 400, 404)},
		{method: "POST", path: "/v1/sessions/{id}/turns", summary: "Admit a turn; refused while the session's run is live",
			body: wire.TurnRequest{}, answers: with(ack(wire.TurnAdmission{}, 202), 400, 404, 409, 413, 429, 501), headers: runHeaders},
		{method: "POST", path: "/v1/sessions/{id}/input", summary: "Admit a turn once the session's live run ended",
			body: wire.TurnRequest{}, answers: with(ack(wire.TurnAdmission{}, 202), 400, 404, 408, 409, 413, 429, 501), headers: runHeaders},
		{method: "GET", path: "/v1/sessions/{id}/events", summary: "Replay and follow a session's events",
			answers: with(ack(sse{}, 200), 400, 404, 409, 410)},
		{method: "POST", path: "/v1/sessions/{id}/steer", summary: "More input for the turn a session's run is running",
			body: wire.SteerRequest{}, answers: with(ack(wire.ControlAck{}, 200, 404, 409, 501, 502), 400, 404, 413)},
		{method: "POST", path: "/v1/sessions/{id}/cancel", summary: "Cancel a turn of the session, named exactly; an exact, idempotent cancellation",
			query: []string{"wait_ms"}, body: wire.CancellationRequest{},
			answers: with(ack(wire.CancellationAck{}, 200, 202, 409), 400, 404, 413)},
		{method: "POST", path: "/v1/sessions/{id}/close", summary: "Close a session and cancel its live run", query: []string{"wait_ms"},
			answers: with(ack(wire.SessionStop{}, 200, 202), 400, 404)},
		{method: "POST", path: "/v1/sessions/{id}/detach", summary: "Detach; the session and its run go on",
			answers: with(ack(wire.SessionDetach{}, 200), 400, 404)},
		{method: "POST", path: "/v1/sessions/{id}/continue", summary: "Native continuation at an expected context boundary",
			body: wire.ContinueBody{}, answers: with(ack(wire.ContinuationOutcome{}, 200, 404, 409, 422, 503), 400, 413)},
	}
}

// catalogRoutes are the operations of the profile catalog and this document.
func catalogRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/profiles", summary: "The profile catalog", answers: ack(wire.ProfileList{}, 200)},
		{method: "GET", path: "/v1/profiles/{id}", summary: "One profile of the catalog",
			answers: with(ack(wire.ProfileDocument{}, 200), 404)},
		{method: "GET", path: "/openapi.json", summary: "This document", answers: ack(map[string]any{}, 200)},
	}
}

// branchRoutes are the operations of workspace checkpoints and forks,
// and of portable contexts.
func branchRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/workspace/checkpoints", summary: "Checkpoint the workspace of an ended run, keyed and digest-bound",
			body: wire.CheckpointRequest{}, answers: with(ack(wire.CheckpointResult{}, 200, 201, 409, 410), 400, 404, 413, 501)},
		{method: "POST", path: "/v1/workspace/checkpoints/lookup", summary: "The checkpoint bound to a key",
			body: wire.OperationLookup{}, answers: with(ack(wire.CheckpointResult{}, 200, 409), 400, 413)},
		{method: "POST", path: "/v1/workspace/checkpoints/delete", summary: "Delete a checkpoint once no fork of it lives",
			body: wire.CleanupRequest{}, answers: with(ack(wire.CleanupAck{}, 200, 409), 400, 413)},
		{method: "POST", path: "/v1/workspace/forks", summary: "Fork a checkpoint into a new environment, keyed and digest-bound",
			body: wire.ForkRequest{}, answers: with(ack(wire.ForkResult{}, 200, 201, 409, 410), 400, 404, 413, 501)},
		{method: "POST", path: "/v1/workspace/forks/lookup", summary: "The fork bound to a key",
			body: wire.OperationLookup{}, answers: with(ack(wire.ForkResult{}, 200, 409), 400, 413)},
		{method: "POST", path: "/v1/workspace/forks/destroy", summary: "Destroy a forked environment",
			body: wire.CleanupRequest{}, answers: with(ack(wire.CleanupAck{}, 200, 409), 400, 413)},
		{method: "GET", path: "/v1/workspace/forks/{id}", summary: "A live fork and its workspace directory",
			answers: with(ack(wire.ForkWorkspace{}, 200), 404)},
		{method: "POST", path: "/v1/context/plans", summary: "Plan which messages of a portable context can travel; no effect",
			body: wire.ContextPlanRequest{}, answers: with(ack(wire.ContextPlanResult{}, 200), 400, 413)},
		{method: "POST", path: "/v1/context/transfers", summary: "Attach an accepted context plan to one fresh session and run",
			body: wire.ContextTransferRequest{},
			answers: with(map[int][]any{200: {wire.ContextTransferReceipt{}}, 201: {wire.ContextTransferReceipt{}},
				409: {wire.ContextTransferConflict{}}}, 400, 404, 409, 413, 429, 501)},
	}
}

// exactRoutes are the operations of exact process environments.
func exactRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/exact/environments", summary: "Create an exact process environment, keyed and digest-bound",
			body: wire.ExactEnvironmentRequest{}, answers: with(ack(wire.ExactEnvironmentResult{}, 200, 201), 400, 409, 413, 501)},
		{method: "GET", path: "/v1/exact/environments", summary: "Live exact environments whose metadata holds the query's",
			query: []string{"metadata"}, answers: with(ack(wire.ExactEnvironmentList{}, 200), 400)},
		{method: "GET", path: "/v1/exact/environments/{id}", summary: "A live exact environment",
			answers: with(ack(wire.ExactEnvironment{}, 200), 404)},
		{method: "DELETE", path: "/v1/exact/environments/{id}", summary: "Destroy an exact environment and kill its processes",
			answers: with(ack(wire.ExactDestroyResult{}, 200), 404)},
		{method: "PUT", path: "/v1/exact/environments/{id}/files", summary: "Write a file under the environment's /tmp",
			body: wire.ExactFileWrite{}, answers: with(ack(wire.ExactFile{}, 200), 400, 404, 413)},
		{method: "POST", path: "/v1/exact/environments/{id}/files/read", summary: "Read a file under the environment's /tmp, bounded",
			body: wire.ExactFileRead{}, answers: with(ack(wire.ExactFile{}, 200), 400, 404, 413, 422)},
		{method: "POST", path: "/v1/exact/environments/{id}/processes", summary: "Start a shell-free process under bubblewrap",
			body: wire.ExactLaunch{}, answers: with(ack(wire.ExactProcessStatus{}, 201), 400, 404, 413, 501)},
		{method: "GET", path: "/v1/exact/environments/{id}/processes", summary: "The environment's processes",
			answers: with(ack(wire.ExactProcessList{}, 200), 404)},
		{method: "GET", path: "/v1/exact/environments/{id}/processes/{pid}", summary: "A process's status; wait_ms waits for its end",
			query: []string{"wait_ms"}, answers: with(ack(wire.ExactProcessStatus{}, 200), 400, 404)},
		{method: "GET", path: "/v1/exact/environments/{id}/processes/{pid}/output", summary: "A process's stdout or stderr, followed until it ends",
			query: []string{"stream"}, answers: with(ack(text{}, 200), 400, 404)},
		{method: "POST", path: "/v1/exact/environments/{id}/processes/{pid}/kill", summary: "Kill a process's tree; idempotent",
			answers: with(ack(wire.ExactProcessStatus{}, 200), 400, 404)},
		{method: "POST", path: "/v1/exec", summary: "Run a command to its end in the box, as the harnesses' user, from their environment",
			body: wire.ExecRequest{}, answers: with(ack(wire.ExecResult{}, 200), 400, 413)},
	}
}

// statusText names a status for a response description.
func statusText(s int) string { return http.StatusText(s) }
