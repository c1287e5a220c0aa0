package e2b

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// This file speaks the Connect protocol's JSON encoding, as envd serves
// its process API: unary calls are a JSON body each way; a server stream
// answers with envelopes [flags:1][length:4, big endian][message], the
// last one flagged endStream and holding {"error"?, "metadata"?}.

const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
	maxEnvelope    = 16 << 20
)

// ConnectError is an error a Connect call ended with: Code is the
// protocol's ("not_found", "invalid_argument", "unavailable", ...).
type ConnectError struct {
	Procedure string
	Code      string `json:"code"`
	Message   string `json:"message"`
}

func (e *ConnectError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("e2b: envd %s: %s", e.Procedure, e.Code)
	}
	return fmt.Sprintf("e2b: envd %s: %s: %s", e.Procedure, e.Code, e.Message)
}

// envelope writes one message as a stream envelope.
func envelope(msg []byte, flags byte) []byte {
	b := make([]byte, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// streamReader reads the envelopes of a server stream.
type streamReader struct {
	procedure string
	r         *bufio.Reader
	body      io.Closer
	done      bool
}

func newStreamReader(procedure string, body io.ReadCloser) *streamReader {
	return &streamReader{procedure: procedure, r: bufio.NewReader(body), body: body}
}

// errStreamCut is a stream that ended without its end-of-stream frame.
var errStreamCut = errors.New("stream cut before its end")

// next returns the next message. At the end of the stream it returns
// io.EOF, or the *ConnectError the stream ended with; a stream cut before
// its end-of-stream frame is errStreamCut (wrapping the read error).
func (s *streamReader) next() (json.RawMessage, error) {
	if s.done {
		return nil, io.EOF
	}
	var hdr [5]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", errStreamCut, err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxEnvelope {
		return nil, fmt.Errorf("e2b: envd %s: envelope of %d bytes", s.procedure, n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(s.r, msg); err != nil {
		return nil, fmt.Errorf("%w: %w", errStreamCut, err)
	}
	if hdr[0]&flagCompressed != 0 {
		return nil, fmt.Errorf("e2b: envd %s: compressed envelope, none asked for", s.procedure)
	}
	if hdr[0]&flagEndStream == 0 {
		return msg, nil
	}
	s.done = true
	var end struct {
		Error *ConnectError `json:"error"`
	}
	if len(bytes.TrimSpace(msg)) > 0 {
		if err := json.Unmarshal(msg, &end); err != nil {
			return nil, fmt.Errorf("e2b: envd %s: end of stream: %w", s.procedure, err)
		}
	}
	if end.Error != nil {
		end.Error.Procedure = s.procedure
		return nil, end.Error
	}
	return nil, io.EOF
}

func (s *streamReader) close() error { return s.body.Close() }
