package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
)

// exampleBridge is a minimal stand-in for a bridge so the example runs
// offline: it admits one run and serves its recorded frames.
func exampleBridge() *httptest.Server {
	var run struct{ id, provider, env, session, exec string }
	const digest = "sha256:4f2b6c1e9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"
	frames := `id: 1
data: {"object":"chat.completion.chunk","model":"codex/gpt-5","choices":[{"index":0,"delta":{"content":"Found 3 packages."},"finish_reason":null}]}

id: 2
data: {"object":"chat.completion.chunk","model":"codex/gpt-5","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
	headers := func(w http.ResponseWriter) {
		w.Header().Set(wire.HeaderRunID, run.id)
		w.Header().Set(wire.HeaderRunRequestDigest, digest)
		w.Header().Set(wire.HeaderRunProvider, run.provider)
		w.Header().Set(wire.HeaderRunEnvironmentID, run.env)
		w.Header().Set(wire.HeaderRunSessionID, run.session)
		w.Header().Set(wire.HeaderRunExecutionID, run.exec)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body wire.ChatRequest
		json.NewDecoder(r.Body).Decode(&body)
		run.id, run.provider, run.env, run.session, run.exec = body.RunID, body.Provider, body.EnvironmentID, body.SessionID, body.ExecutionID
		headers(w)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": connected\n\n")
	})
	mux.HandleFunc("GET /v1/runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		headers(w)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, frames)
	})
	mux.HandleFunc("GET /v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(wire.RunSnapshot{ID: run.id, RequestDigest: digest, Status: wire.StatusDone, State: wire.StateTerminal,
			Terminal: true, Provider: run.provider, EnvironmentID: run.env, SessionID: run.session, ExecutionID: run.exec})
	})
	return httptest.NewServer(mux)
}

// saveControlRef stands for the caller's durable store.
func saveControlRef(ref provider.ControlRef) error {
	_, err := json.Marshal(ref)
	return err
}

func Example() {
	bridge := exampleBridge()
	defer bridge.Close()
	ctx := context.Background()

	p, err := provider.New(provider.Options{
		BaseURL:          bridge.URL,
		BearerToken:      "bridge-token",
		DefaultExecution: &provider.Execution{Kind: provider.ExecutionHost, Jail: &provider.Jail{Mode: "fs-jail"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	env, err := p.Create(ctx, provider.CreateRequest{
		Profile: provider.Profile{Name: "researcher", Harness: "codex", Model: provider.ProfileModel{Default: "gpt-5"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	ref, err := env.Dispatch(ctx, provider.Turn{
		Prompt:      "inspect the repository",
		SessionID:   "research-session",
		ExecutionID: "research-turn-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := saveControlRef(ref.ControlRef); err != nil {
		log.Fatal(err)
	}
	session, err := env.Session(ref.ID, provider.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for event, err := range session.Events(ctx, "0") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(event.ID, event.Type, event.Delta+event.FinalText)
	}
	fmt.Println("run", ref.ControlRef.RunID, "session", ref.ID)
	// Output:
	// 1:0 message.part.updated Found 3 packages.
	// 2:0 result Found 3 packages.
	// run research-turn-1 session research-session
}
