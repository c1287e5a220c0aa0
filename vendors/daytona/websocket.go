package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The toolbox streams a command's log over a WebSocket (RFC 6455). This
// is the little of the protocol a reader needs, spoken over the client's
// own transport (its dialling, TLS and proxies): the upgrade, data frames
// in, answers to ping and close.

// maxFrame bounds one frame's payload.
const maxFrame = 16 << 20

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsConn is the reading end of a WebSocket. next and Close may be called
// from different goroutines.
type wsConn struct {
	rwc     io.ReadWriteCloser
	writeMu sync.Mutex
	once    sync.Once
}

// dialWebSocket opens a WebSocket to rawURL (http or https) with header.
func dialWebSocket(ctx context.Context, hc *http.Client, rawURL string, header http.Header) (*wsConn, error) {
	var key [16]byte
	_, _ = rand.Read(key[:])
	k := base64.StdEncoding.EncodeToString(key[:])
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	for h, vs := range header {
		req.Header[h] = vs
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", k)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &wsRefusedError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("websocket: the upgraded connection is not writable")
	}
	sum := sha1.Sum([]byte(k + wsGUID))
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		rwc.Close()
		return nil, errors.New("websocket: bad Sec-WebSocket-Accept")
	}
	return &wsConn{rwc: rwc}, nil
}

// wsRefusedError is an upgrade the server answered with another status.
type wsRefusedError struct {
	Status int
	Body   string
}

func (e *wsRefusedError) Error() string {
	return fmt.Sprintf("websocket: %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// next returns the next data frame's payload; io.EOF after the server's
// close frame.
func (c *wsConn) next() ([]byte, error) {
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.rwc, h[:]); err != nil {
			return nil, unexpected(err)
		}
		op, masked := h[0]&0x0f, h[1]&0x80 != 0
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(c.rwc, b[:]); err != nil {
				return nil, unexpected(err)
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(c.rwc, b[:]); err != nil {
				return nil, unexpected(err)
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > maxFrame {
			return nil, fmt.Errorf("websocket: a %d byte frame", n)
		}
		var mask [4]byte
		if masked {
			if _, err := io.ReadFull(c.rwc, mask[:]); err != nil {
				return nil, unexpected(err)
			}
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c.rwc, payload); err != nil {
			return nil, unexpected(err)
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch op {
		case 0x0, 0x1, 0x2: // continuation, text, binary
			if len(payload) > 0 {
				return payload, nil
			}
		case 0x8: // close
			_ = c.write(0x8, payload[:min(len(payload), 2)])
			return nil, io.EOF
		case 0x9: // ping
			if err := c.write(0xA, payload); err != nil {
				return nil, err
			}
		}
	}
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// write sends one masked frame (clients mask every frame).
func (c *wsConn) write(op byte, payload []byte) error {
	if len(payload) > 125 {
		return errors.New("websocket: control frame too long")
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	f := append([]byte{0x80 | op, 0x80 | byte(len(payload))}, mask[:]...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.rwc.Write(f)
	return err
}

// Close ends the connection.
func (c *wsConn) Close() error {
	var err error
	c.once.Do(func() { err = c.rwc.Close() })
	return err
}

// The toolbox's log marks each line with the stream it came from.
var (
	stdoutMark = []byte{0x01, 0x01, 0x01}
	stderrMark = []byte{0x02, 0x02, 0x02}
)

// demux splits a marked log into stdout and stderr, across chunks: a mark
// split between two chunks is held back until the next.
type demux struct {
	cur  int // 0 none yet, 1 stdout, 2 stderr
	hold []byte
}

// feed returns the stdout and stderr bytes of chunk (with what was held).
func (d *demux) feed(chunk []byte) (stdout, stderr []byte) {
	buf := append(d.hold, chunk...)
	d.hold = nil
	emit := func(b []byte) {
		switch d.cur {
		case 1:
			stdout = append(stdout, b...)
		case 2:
			stderr = append(stderr, b...)
		}
	}
	for len(buf) > 0 {
		o, e := bytes.Index(buf, stdoutMark), bytes.Index(buf, stderrMark)
		i, next := o, 1
		if o < 0 || (e >= 0 && e < o) {
			i, next = e, 2
		}
		if i < 0 {
			// Keep what could be the start of a mark.
			keep := 0
			for k := min(len(buf), len(stdoutMark)-1); k > 0; k-- {
				if tail := buf[len(buf)-k:]; bytes.Equal(tail, stdoutMark[:k]) || bytes.Equal(tail, stderrMark[:k]) {
					keep = k
					break
				}
			}
			emit(buf[:len(buf)-keep])
			d.hold = append([]byte(nil), buf[len(buf)-keep:]...)
			return stdout, stderr
		}
		emit(buf[:i])
		buf = buf[i+len(stdoutMark):]
		d.cur = next
	}
	return stdout, stderr
}

// flush returns what feed held back, at the end of the stream.
func (d *demux) flush() (stdout, stderr []byte) {
	h := d.hold
	d.hold = nil
	switch d.cur {
	case 1:
		return h, nil
	case 2:
		return nil, h
	}
	return nil, nil
}

// split demultiplexes a whole log.
func (d *demux) split(log []byte) (stdout, stderr []byte) {
	o, e := d.feed(log)
	fo, fe := d.flush()
	return append(o, fo...), append(e, fe...)
}
