package routerstub

import "sync"

// A Script picks the reply to each request. The server calls Pick once per
// authorized model request, possibly from several goroutines at once, with
// the request as recorded so far (model, prompt, tool-result and side-call
// flags set; status and usage not yet).
type Script interface {
	Pick(r Request) Reply
}

// ScriptFunc adapts a function to a Script.
type ScriptFunc func(Request) Reply

// Pick calls f.
func (f ScriptFunc) Pick(r Request) Reply { return f(r) }

// Queue is the Script most tests want. It answers, in this order of rules:
//
//  1. a side call (Request.Side) with the side reply, never touching the
//     queue, so a CLI's title or summary calls cannot eat the reply meant
//     for the turn;
//  2. a request whose last message carries a tool result with the
//     after-tool reply, when one is set;
//  3. anything else with the next queued reply, or the default reply once
//     the queue is empty.
//
// A Queue is safe for concurrent use.
type Queue struct {
	mu        sync.Mutex
	queue     []Reply
	def       Reply
	side      Reply
	afterTool *Reply
}

// NewQueue returns a Queue that answers replies in order, then def. The
// side reply defaults to Text("Side reply."); there is no after-tool reply
// until AfterTool sets one.
func NewQueue(def Reply, replies ...Reply) *Queue {
	return &Queue{queue: append([]Reply(nil), replies...), def: def, side: Text("Side reply.")}
}

// Push appends replies to the queue.
func (q *Queue) Push(replies ...Reply) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, replies...)
}

// AfterTool sets the reply to requests whose last message carries a tool
// result, and returns q.
func (q *Queue) AfterTool(r Reply) *Queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.afterTool = &r
	return q
}

// Side sets the reply to side calls, and returns q.
func (q *Queue) Side(r Reply) *Queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.side = r
	return q
}

// Len returns the number of replies still queued.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Pick implements Script.
func (q *Queue) Pick(r Request) Reply {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case r.Side:
		return q.side
	case r.ToolResult && q.afterTool != nil:
		return *q.afterTool
	case len(q.queue) > 0:
		next := q.queue[0]
		q.queue = q.queue[1:]
		return next
	default:
		return q.def
	}
}
