package harnesstest

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// CancelBody is the body of an exact cancellation, operation op, of the
// run snap describes, as POST /v1/sessions/:id/cancel takes it: the run's
// six coordinates and the request's own digest.
func CancelBody(t testing.TB, op string, snap wire.RunSnapshot) string {
	t.Helper()
	req := wire.CancellationRequest{OperationID: op, Run: wire.RunRef{RunID: snap.ID, Provider: snap.Provider,
		EnvironmentID: snap.EnvironmentID, SessionID: snap.SessionID, ExecutionID: snap.ExecutionID, RequestDigest: snap.RequestDigest}}
	d, err := wire.CancellationDigest(req)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestDigest = d
	return string(wire.MustJSON(req))
}

// CancelTurn cancels run, a turn of session, exactly and waits up to 20 s
// for it to end: the answer of POST /v1/sessions/:id/cancel.
func (l *Live) CancelTurn(t *testing.T, session, run string) *http.Response {
	t.Helper()
	var snap wire.RunSnapshot
	if resp := l.Do(t, "GET", "/v1/runs/"+run, ""); resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		t.Fatalf("GET /v1/runs/%s = %d", run, resp.StatusCode)
	}
	return l.Do(t, "POST", "/v1/sessions/"+session+"/cancel?wait_ms=20000", CancelBody(t, "cancel-"+run, snap))
}
