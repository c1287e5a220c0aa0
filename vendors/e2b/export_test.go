package e2b

import (
	"context"
	"time"
)

// BoxOf returns a box of sandbox id with the contract's envd token,
// without a call, for the contract tests.
func BoxOf(v *Vendor, id string) *Box {
	return (&Box{v: v, id: id, domain: v.o.domain, accessToken: "envd-token"}).withProcs()
}

// ConnectPaused resumes the paused sandbox id by connecting to it, as a
// pool of paused standby boxes would at a claim: the box as it was, its
// processes kept, none of Resume's bookkeeping.
func ConnectPaused(ctx context.Context, v *Vendor, id string) (*Box, error) {
	sb, err := v.connectSandbox(ctx, id, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	return v.newBox(sb), nil
}
