package daytonaemu

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// The events channel: Daytona's notification gateway, a Socket.IO server
// at /api/socket.io/ that the official SDKs open (WebSocket transport
// only) to learn of state changes without polling. The emulator speaks
// Engine.IO 4 and Socket.IO 5 over a WebSocket: the client authenticates
// in its CONNECT packet ({"token": API key}); a wrong key is refused
// with a CONNECT_ERROR, as the gateway does; then every state change of
// a sandbox is an EVENT "sandbox.state.updated" {sandbox, oldState,
// newState} and every create "sandbox.created" (the Sandbox).

// eventsPath is where the events channel is served.
const eventsPath = "/api/socket.io/"

// pingInterval is how often the server pings an events connection.
const pingInterval = 25 * time.Second

// event is one Socket.IO event to send.
type event struct {
	name string
	data any
}

// publish sends ev to every events connection; a connection too slow to
// take it loses it (the SDK polls as well). Call with s.mu.
func (s *Server) publish(name string, data any) {
	for c := range s.listeners {
		select {
		case c <- event{name, data}:
		default:
		}
	}
}

// notify publishes sb's state change from old. Call with s.mu.
func (s *Server) notify(sb *sandbox, old string) {
	if old == sb.State {
		return
	}
	s.publish("sandbox.state.updated", map[string]any{"sandbox": s.dto(sb), "oldState": old, "newState": sb.State})
}

// events serves one events connection.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("EIO") != "4" || q.Get("transport") != "websocket" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":3,"message":"Bad request"}`))
		return
	}
	websocket.Server{Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler: s.eventsConn}.ServeHTTP(w, r)
}

func (s *Server) eventsConn(ws *websocket.Conn) {
	defer ws.Close()
	sid := newID(10)
	open, _ := json.Marshal(map[string]any{"sid": sid, "upgrades": []string{}, "pingInterval": pingInterval.Milliseconds(),
		"pingTimeout": 20000, "maxPayload": 1000000})
	if websocket.Message.Send(ws, "0"+string(open)) != nil {
		return
	}
	in := make(chan string)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(in)
		for {
			var msg string
			if websocket.Message.Receive(ws, &msg) != nil {
				return
			}
			select {
			case in <- msg:
			case <-done:
				return
			}
		}
	}()
	out := make(chan event, 256)
	defer func() {
		s.mu.Lock()
		delete(s.listeners, out)
		s.mu.Unlock()
	}()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	connected := false
	for {
		select {
		case <-s.ctx.Done():
			_ = websocket.Message.Send(ws, "1")
			return
		case <-ping.C:
			if websocket.Message.Send(ws, "2") != nil {
				return
			}
		case ev := <-out:
			b, err := json.Marshal([]any{ev.name, ev.data})
			if err != nil || websocket.Message.Send(ws, "42"+string(b)) != nil {
				return
			}
		case msg, ok := <-in:
			if !ok {
				return
			}
			switch {
			case msg == "3" || msg == "2":
				if msg == "2" && websocket.Message.Send(ws, "3") != nil {
					return
				}
			case msg == "1" || msg == "41":
				return
			case strings.HasPrefix(msg, "40") && !connected:
				var auth struct {
					Token string `json:"token"`
				}
				_ = json.Unmarshal([]byte(strings.TrimPrefix(msg, "40")), &auth)
				if auth.Token != s.opts.APIKey {
					_ = websocket.Message.Send(ws, `44{"message":"Unauthorized"}`)
					continue
				}
				connected = true
				s.mu.Lock()
				s.listeners[out] = struct{}{}
				s.mu.Unlock()
				if websocket.Message.Send(ws, `40{"sid":"`+newID(10)+`"}`) != nil {
					return
				}
			}
		}
	}
}
