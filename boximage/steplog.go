package boximage

import (
	"bytes"
	"strings"
	"sync"

	"github.com/moby/buildkit/client"
	digest "github.com/opencontainers/go-digest"
)

// Bounds of what stepLogs keeps.
const (
	stepLogLines = 200 // lines kept per step
	stepErrLines = 20  // lines a StepError quotes
	stepNameLen  = 120 // characters of a step name a StepError quotes
)

// stepLogs records, from a BuildKit status stream, each step's name, error
// and last output lines, so that a failed build can say what the failing
// step printed (npm's error, say) rather than only its exit code.
type stepLogs struct {
	mu     sync.Mutex
	names  map[digest.Digest]string
	failed []digest.Digest // steps with an error, in the order reported
	errs   map[digest.Digest]string
	lines  map[digest.Digest][]string
	part   map[digest.Digest][]byte // an unfinished last line
}

func newStepLogs() *stepLogs {
	return &stepLogs{names: map[digest.Digest]string{}, errs: map[digest.Digest]string{},
		lines: map[digest.Digest][]string{}, part: map[digest.Digest][]byte{}}
}

// tee records every status from in and passes it on to out until in is
// closed, then closes out. The reader of out must drain it.
func (s *stepLogs) tee(in <-chan *client.SolveStatus, out chan<- *client.SolveStatus) {
	defer close(out)
	for st := range in {
		s.record(st)
		out <- st
	}
}

func (s *stepLogs) record(st *client.SolveStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range st.Vertexes {
		s.names[v.Digest] = v.Name
		if v.Error != "" {
			if _, seen := s.errs[v.Digest]; !seen {
				s.failed = append(s.failed, v.Digest)
			}
			s.errs[v.Digest] = v.Error
		}
	}
	for _, l := range st.Logs {
		data := append(s.part[l.Vertex], l.Data...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			s.addLine(l.Vertex, string(bytes.TrimRight(data[:i], "\r")))
			data = data[i+1:]
		}
		s.part[l.Vertex] = append([]byte(nil), data...)
	}
}

func (s *stepLogs) addLine(d digest.Digest, line string) {
	ls := append(s.lines[d], line)
	if len(ls) > stepLogLines {
		ls = append(ls[:0], ls[len(ls)-stepLogLines:]...)
	}
	s.lines[d] = ls
}

// wrap returns err as a *StepError naming the step that failed first (not
// merely cancelled) with what it printed, or err itself when no step failed.
func (s *stepLogs) wrap(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.failed {
		if strings.Contains(s.errs[d], "context canceled") {
			continue
		}
		lines := s.lines[d]
		if p := s.part[d]; len(p) > 0 {
			lines = append(lines[:len(lines):len(lines)], string(p))
		}
		return &StepError{Step: shorten(s.names[d], stepNameLen), Log: explaining(lines), Err: err}
	}
	return err
}

// explaining picks the lines that explain a failure: npm's error lines when
// there are any, else the last ones; BuildKit's own "#N 0.123" prefixes are
// not part of the step's output, so there are none to strip.
func explaining(lines []string) []string {
	var npm []string
	for _, l := range lines {
		if strings.HasPrefix(l, "npm error") || strings.HasPrefix(l, "npm ERR!") {
			npm = append(npm, l)
		}
	}
	if len(npm) > 0 {
		lines = npm
	}
	if len(lines) > stepErrLines {
		lines = lines[len(lines)-stepErrLines:]
	}
	return append([]string(nil), lines...)
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
