package provider

import (
	"bufio"
	"io"
	"strings"
)

// frame is one SSE event: its data lines joined by newlines, and its id
// and event fields when present. Comment lines (": keepalive") are
// dropped; a frame without data is dropped.
type frame struct {
	ID       string
	HasID    bool
	Event    string
	HasEvent bool
	Data     string
}

// maxFrameBytes bounds one SSE line; a bigger line is a protocol error.
const maxFrameBytes = 16 << 20

// sseReader reads frames from an SSE body.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxFrameBytes)
	return &sseReader{sc: sc}
}

// next returns the next frame with data, or io.EOF at the end of the body.
func (s *sseReader) next() (frame, error) {
	var f frame
	var data []string
	hasData := false
	for s.sc.Scan() {
		line := strings.TrimSuffix(s.sc.Text(), "\r")
		if line == "" {
			if hasData {
				f.Data = strings.Join(data, "\n")
				return f, nil
			}
			f = frame{}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "data":
			data = append(data, value)
			hasData = true
		case "id":
			f.ID, f.HasID = strings.TrimSpace(value), true
		case "event":
			f.Event, f.HasEvent = strings.TrimSpace(value), true
		}
	}
	if err := s.sc.Err(); err != nil {
		return frame{}, err
	}
	if hasData {
		f.Data = strings.Join(data, "\n")
		return f, nil
	}
	return frame{}, io.EOF
}
