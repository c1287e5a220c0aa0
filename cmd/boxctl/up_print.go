package main

import (
	"fmt"
	"io"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// upResult is what `up` prints.
type upResult struct {
	ID       string    `json:"id"`
	Target   string    `json:"target"`
	Endpoint string    `json:"endpoint"`
	Harness  string    `json:"harness"`
	Model    string    `json:"model,omitempty"`
	Image    string    `json:"image"`
	RunTag   string    `json:"runTag"`
	Lifetime string    `json:"lifetime"`
	Deadline time.Time `json:"deadline"`
	Router   string    `json:"router"`
	// Upstream names the box's upstream at the user's broker, which holds
	// its key; the box holds a token of its own.
	Upstream string `json:"upstream"`
	Bearer   string `json:"bearer,omitempty"`
	// Timings are the create's phases (with --timings).
	Timings []sandbox.Phase `json:"timings,omitempty"`
	// Pool says where the box came from: hit (it waited in a pool),
	// waited (the claim waited for one) or miss-cold (created for it).
	Pool pool.Outcome `json:"pool"`
	// Egress is the box's egress policy (egress.Policy.Summary), when it
	// has one.
	Egress string `json:"egress,omitempty"`
}

func printUp(a *app, o *upOptions, rec boxstate.Record, phases []sandbox.Phase, outcome pool.Outcome) error {
	ref := rec.Reference
	res := upResult{ID: rec.ID, Target: rec.Target, Endpoint: ref.Endpoint, Harness: ref.Harness, Model: o.model,
		Image: rec.Image, RunTag: rec.RunTag, Lifetime: o.lifetime.String(), Deadline: rec.Deadline, Router: o.up.URL, Upstream: rec.Upstream, Pool: outcome}
	if rec.Router != nil {
		res.Router = rec.Router.URL
	}
	if o.showBearer {
		res.Bearer = ref.Bearer
	}
	if rec.Egress != nil {
		res.Egress = rec.Egress.Summary()
	}
	if o.timings {
		res.Timings = phases
	}
	return a.print(res, func(w io.Writer) error {
		model := res.Model
		if model == "" {
			model = "(the harness's default)"
		}
		router := res.Router
		if rec.Router != nil {
			router += " (local model endpoint, pid " + fmt.Sprint(rec.Router.PID) + ")"
		}
		lines := [][2]string{{"id", res.ID}, {"endpoint", res.Endpoint}, {"harness", res.Harness}, {"model", model},
			{"image", res.Image}, {"run tag", res.RunTag},
			{"deadline", res.Deadline.Local().Format(time.RFC3339) + " (lifetime " + res.Lifetime + ")"}, {"router", router},
			{"upstream", res.Upstream + " (through the broker; the box holds a token)"}, {"pool", string(res.Pool)}}
		if res.Egress != "" {
			lines = append(lines, [2]string{"egress", res.Egress})
		}
		if o.showBearer {
			lines = append(lines, [2]string{"bearer", res.Bearer})
		}
		for _, l := range lines {
			if _, err := fmt.Fprintf(w, "%-9s %s\n", l[0], l[1]); err != nil {
				return err
			}
		}
		if !o.timings {
			return nil
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
		return render.Timings(w, phases)
	})
}
