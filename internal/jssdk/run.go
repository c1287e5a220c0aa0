package jssdk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// RunOptions is one script run.
type RunOptions struct {
	// Script is the ESM source (.mjs). Its bare imports resolve from the
	// installation's node_modules.
	Script []byte
	// Env is the script's whole environment besides PATH and HOME, which
	// Run sets; the caller's environment is not passed on.
	Env map[string]string
	// Args are the script's arguments.
	Args []string
	// OnLine, if set, sees each JSON line as it is printed.
	OnLine func(json.RawMessage)
}

// Output is what a script printed.
type Output struct {
	// Lines are its stdout lines that are JSON objects, in order.
	Lines []json.RawMessage
	// Text is the rest of its stdout.
	Text string
	// Stderr is its standard error.
	Stderr string
}

// Step is one line of a scenario script: {step, ok, detail, ms}.
type Step struct {
	// Step names the step.
	Step string `json:"step"`
	// OK reports that the step's result was the documented one.
	OK bool `json:"ok"`
	// Detail says what was seen (or what differed).
	Detail any `json:"detail,omitempty"`
	// MS is how long the step took, in milliseconds.
	MS float64 `json:"ms"`
}

// Steps decodes the lines that carry a step name.
func (o *Output) Steps() ([]Step, error) {
	var out []Step
	for _, l := range o.Lines {
		var s Step
		if err := json.Unmarshal(l, &s); err != nil {
			return out, fmt.Errorf("jssdk: step line %s: %w", l, err)
		}
		if s.Step != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// Run runs a script with the installation's Node and returns its output.
// The process is killed when ctx ends. A script that exits non-zero
// returns its output with an error quoting its stderr.
func (in Installation) Run(ctx context.Context, o RunOptions) (*Output, error) {
	script, err := in.writeScript(o.Script)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, in.Node, append([]string{script}, o.Args...)...)
	cmd.Dir = in.Dir
	cmd.Env = []string{"PATH=" + filepath.Dir(in.Node) + ":/usr/bin:/bin", "HOME=" + in.Dir}
	for k, v := range o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("jssdk run: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jssdk run: %w", err)
	}
	out := &Output{}
	var text strings.Builder
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) > 0 && line[0] == '{' && json.Valid(line) {
				raw := json.RawMessage(bytes.Clone(line))
				out.Lines = append(out.Lines, raw)
				if o.OnLine != nil {
					o.OnLine(raw)
				}
				continue
			}
			text.Write(sc.Bytes())
			text.WriteByte('\n')
		}
	})
	wg.Wait()
	err = cmd.Wait()
	out.Text, out.Stderr = text.String(), stderr.String()
	if err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("jssdk run: %w (%w)", ctx.Err(), err)
		}
		return out, fmt.Errorf("jssdk run: %w\n%s", err, tail(out.Stderr, 4000))
	}
	return out, nil
}

// writeScript puts the script in the installation's scripts directory
// under its content hash, atomically, so concurrent runs share it.
func (in Installation) writeScript(src []byte) (string, error) {
	sum := sha256.Sum256(src)
	dir := filepath.Join(in.Dir, "scripts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("jssdk run: %w", err)
	}
	path := filepath.Join(dir, hex.EncodeToString(sum[:12])+".mjs")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := os.CreateTemp(dir, ".script-*")
	if err != nil {
		return "", fmt.Errorf("jssdk run: %w", err)
	}
	_, werr := f.Write(src)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("jssdk run: %w", werr)
	}
	return path, nil
}
