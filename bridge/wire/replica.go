package wire

import "encoding/json"

// The replica of a box's events outside it: the bridge ships each run's
// events, as they are stored, to the broker it reaches its model upstream
// through, presenting the box's token; the broker keeps them past the
// box. These are boxctl's own routes on the broker, not the bridge's.
const (
	// ReplicaPath lists the runs the replica holds of the presenting box
	// (GET: a ReplicaRuns) and, under it by run id, takes a batch of a
	// run's events (POST /boxctl/v1/replica/runs/{run}: a ReplicaBatch;
	// answers a ReplicaRun).
	ReplicaPath = "/boxctl/v1/replica/runs"
	// TypeReplicaGap is a batch that starts past the replica's last
	// event of the run: the answer's ReplicaRun says where to resume.
	TypeReplicaGap = "replica_gap"
)

// ReplicaBatch is a run's events from First on, in order, with what the
// replica keeps of the run beside them.
type ReplicaBatch struct {
	SessionID string `json:"sessionId,omitempty"`
	// Status is the run's status when the batch was read (running, done,
	// error, cancelled).
	Status string            `json:"status"`
	First  int64             `json:"first"`
	Events []json.RawMessage `json:"events"`
}

// ReplicaRun is what the replica holds of a run.
type ReplicaRun struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Status    string `json:"status"`
	// LastSeq is the last event held (0: none).
	LastSeq int64 `json:"lastSeq"`
	// Updated is when the last batch came (unix ms).
	Updated int64 `json:"updated"`
}

// ReplicaRuns lists the runs the replica holds of a box.
type ReplicaRuns struct {
	Runs []ReplicaRun `json:"runs"`
}
