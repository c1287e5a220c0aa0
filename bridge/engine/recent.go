package engine

import "sync"

// recentBytes bounds the event bytes a live run keeps in memory for its
// readers (recentFrames).
const recentBytes = 4 << 20

// recentFrames are a live run's newest committed frames, kept so that a
// reader that keeps up with the run takes them from memory rather than
// reading back from the store what was just written to it. They are a
// suffix of the run's committed events no longer than the store's
// retention keeps (Options.MaxEvents, MaxBytes) and recentBytes, so that
// every frame they hold is one the store holds too: a reader is given
// nothing the store would have told it was dropped. Frames committed
// other than through add (reset) empty them until the next add, and a
// reader they do not reach reads the store.
type recentFrames struct {
	mu        sync.Mutex
	first     int64    // the sequence number of frames[0]
	frames    [][]byte // committed frames, oldest first; never written
	bytes     int      // the bytes of frames
	maxEvents int
	maxBytes  int
}

// add records that frames, whose last sequence number is last, were
// committed. The frames' bytes must stay as they are.
func (r *recentFrames) add(last int64, frames [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := last - int64(len(frames)) + 1
	if len(r.frames) > 0 && r.first+int64(len(r.frames)) != first {
		r.frames, r.bytes = nil, 0
	}
	if len(r.frames) == 0 {
		r.first = first
	}
	r.frames = append(r.frames, frames...)
	for _, f := range frames {
		r.bytes += len(f)
	}
	drop := 0
	for drop < len(r.frames) && (len(r.frames)-drop > r.maxEvents || r.bytes > r.maxBytes) {
		r.bytes -= len(r.frames[drop])
		drop++
	}
	if drop > 0 {
		// Copied when most of the array is dropped, so that the array
		// does not grow without bound.
		if rest := r.frames[drop:]; 2*drop > len(r.frames) {
			r.frames = append(make([][]byte, 0, 2*len(rest)), rest...)
		} else {
			r.frames = rest
		}
		r.first += int64(drop)
	}
}

// reset forgets the frames: events were committed that add was not told
// of.
func (r *recentFrames) reset() {
	r.mu.Lock()
	r.frames, r.bytes = nil, 0
	r.mu.Unlock()
}

// after returns the frames after sequence number after, up to about
// maxBytes (at least one), and the sequence number of the first; ok is
// false when they hold no frame after+1. The frames are the
// caller's to read, not to change.
func (r *recentFrames) after(after int64, maxBytes int) (first int64, frames [][]byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.frames) == 0 || after+1 < r.first || after+1 >= r.first+int64(len(r.frames)) {
		return 0, nil, false
	}
	rest := r.frames[after+1-r.first:]
	n, size := 0, 0
	for n < len(rest) && (n == 0 || size < maxBytes) {
		size += len(rest[n])
		n++
	}
	return after + 1, rest[:n:n], true
}
