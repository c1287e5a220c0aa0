package server

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// boundBody bounds the time r's body may take to arrive
// (Options.BodyTimeout), so that a client that sends its headers and then
// its body a byte at a time, or never, cannot hold a connection open: it
// sets a read deadline on the connection, and lifts it once the body was
// read to its end, so that what the handler does after (a long poll, an
// SSE stream) is not cut off. A handler that stops reading early leaves
// the deadline, which then bounds the server's discarding of the rest.
// A request without a body gets no deadline: its connection is already
// reading ahead for the next request, and a deadline there would end this
// request's context.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) != nil {
		return // a connection without deadlines (not the bridge's own server)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody lifts its connection's read deadline at the end of the
// body.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(func() { b.rc.SetReadDeadline(time.Time{}) })
	}
	return n, err
}
