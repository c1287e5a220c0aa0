package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP/HTTP exporter. It does what go.opentelemetry.io/otel's
// otlptracehttp does, configured by the same OTEL_EXPORTER_OTLP_*
// variables, without what that module links besides: gRPC, its gateway
// and generated service stubs, and the protobuf runtime, which every
// box's bridge would carry for nothing (9 MB of binary, 5 MB of memory
// at start). The request is encoded with protowire alone (encode.go).

// exportConfig is where and how spans are sent.
type exportConfig struct {
	url         string
	insecure    bool
	headers     map[string]string
	timeout     time.Duration
	compression bool // gzip
	tls         *tls.Config
}

// Defaults of the OTLP/HTTP exporter, as the SDK has them.
const (
	defaultEndpoint   = "localhost:4318"
	defaultTracesPath = "/v1/traces"
	defaultTimeout    = 10 * time.Second
	maxRequestBytes   = 64 << 20
	maxResponseBytes  = 4 << 20
)

// exportConfigFrom reads the OTEL_EXPORTER_OTLP_* variables as the SDK
// reads them: a trace-specific variable (OTEL_EXPORTER_OTLP_TRACES_*)
// over the general one; the general endpoint is a base URL under which
// spans go to /v1/traces, the trace-specific one the URL itself; the
// scheme (http or https) says whether TLS is used unless ..._INSECURE
// says otherwise. A value that cannot be read is reported to the
// OpenTelemetry error handler and left out, as the SDK does.
func exportConfigFrom(getenv func(string) string) (exportConfig, error) {
	env := func(key string) (string, bool) {
		v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + key))
		return v, v != ""
	}
	c := exportConfig{timeout: defaultTimeout}
	host, urlPath := defaultEndpoint, defaultTracesPath
	for _, key := range []string{"ENDPOINT", "TRACES_ENDPOINT"} {
		v, ok := env(key)
		if !ok {
			continue
		}
		u, err := url.Parse(v)
		if err != nil {
			otel.Handle(fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_%s: %w", key, err))
			continue
		}
		host, c.insecure = u.Host, strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "unix")
		switch urlPath = u.Path; {
		case key == "ENDPOINT":
			urlPath = path.Join(u.Path, defaultTracesPath)
		case urlPath == "":
			urlPath = "/"
		}
	}
	for _, key := range []string{"INSECURE", "TRACES_INSECURE"} {
		if v, ok := env(key); ok {
			c.insecure = strings.EqualFold(v, "true")
		}
	}
	for _, key := range []string{"HEADERS", "TRACES_HEADERS"} {
		if v, ok := env(key); ok {
			c.headers = parseHeaders(v)
		}
	}
	for _, key := range []string{"COMPRESSION", "TRACES_COMPRESSION"} {
		if v, ok := env(key); ok {
			c.compression = v == "gzip"
		}
	}
	for _, key := range []string{"TIMEOUT", "TRACES_TIMEOUT"} {
		if v, ok := env(key); ok {
			ms, err := strconv.Atoi(v)
			if err != nil {
				otel.Handle(fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_%s: %w", key, err))
				continue
			}
			c.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	c.tls = tlsConfigFrom(env)
	if c.insecure && c.tls != nil {
		return c, errors.New("insecure HTTP endpoint cannot use TLS client configuration")
	}
	scheme := "https"
	if c.insecure {
		scheme = "http"
	}
	if urlPath = strings.TrimSpace(urlPath); urlPath == "" || urlPath == "." {
		urlPath = defaultTracesPath
	} else if !path.IsAbs(urlPath) {
		urlPath = "/" + urlPath
	}
	c.url = (&url.URL{Scheme: scheme, Host: host, Path: urlPath}).String()
	return c, nil
}

// tlsConfigFrom is the TLS configuration the ..._CERTIFICATE (a CA
// bundle) and ..._CLIENT_CERTIFICATE and ..._CLIENT_KEY variables give
// (nil: none).
func tlsConfigFrom(env func(string) (string, bool)) *tls.Config {
	c := &tls.Config{}
	for _, prefix := range []string{"", "TRACES_"} {
		if file, ok := env(prefix + "CERTIFICATE"); ok {
			pool := x509.NewCertPool()
			if b, err := os.ReadFile(file); err != nil {
				otel.Handle(fmt.Errorf("tracing: read CA certificate: %w", err))
			} else if !pool.AppendCertsFromPEM(b) {
				otel.Handle(fmt.Errorf("tracing: no certificate in %s", file))
			} else {
				c.RootCAs = pool
			}
		}
		certFile, okc := env(prefix + "CLIENT_CERTIFICATE")
		keyFile, okk := env(prefix + "CLIENT_KEY")
		if okc && okk {
			if cert, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
				otel.Handle(fmt.Errorf("tracing: client certificate: %w", err))
			} else {
				c.Certificates = []tls.Certificate{cert}
			}
		}
	}
	if c.RootCAs == nil && len(c.Certificates) == 0 {
		return nil
	}
	return c
}

// parseHeaders reads the headers variable: key=value pairs separated by
// commas, the values URL-encoded.
func parseHeaders(v string) map[string]string {
	headers := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderKey(k) {
			otel.Handle(fmt.Errorf("tracing: header %q: want key=value", pair))
			continue
		}
		dec, err := url.PathUnescape(val)
		if err != nil {
			otel.Handle(fmt.Errorf("tracing: header %q: %w", k, err))
			continue
		}
		headers[k] = strings.TrimSpace(dec)
	}
	return headers
}

func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// exporter sends spans to an OTLP/HTTP receiver as protobuf. A request
// the receiver cannot take now (429, 502, 503, 504, or a temporary
// network error) is sent again after a back-off of 5 s growing to 30 s,
// or after its Retry-After, for at most a minute; Shutdown interrupts it.
type exporter struct {
	cfg    exportConfig
	client *http.Client
	retry  time.Duration // the first back-off (retryInitial)
	stop   chan struct{}
	once   sync.Once
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

func newExporter(cfg exportConfig) *exporter {
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       cfg.tls,
	}
	return &exporter{cfg: cfg, client: &http.Client{Transport: transport, Timeout: cfg.timeout}, retry: retryInitial,
		stop: make(chan struct{})}
}

// ExportSpans sends spans in one request.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	body := exportRequest(spans)
	if len(body) == 0 {
		return nil
	}
	err := fmt.Errorf("request body too large: exceeded %d bytes", maxRequestBytes)
	if len(body) <= maxRequestBytes {
		err = e.send(ctx, body)
	}
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown interrupts the requests under way; the batcher that owns the
// exporter exports nothing after it.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.once.Do(func() { close(e.stop) })
	return ctx.Err()
}

// retryable is a failure the request may be sent again after: after
// throttle at the least (its Retry-After, 0: none).
type retryable struct {
	throttle time.Duration
	err      error
}

func (r *retryable) Error() string { return "retry-able request failure: " + r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// Retries of a request, as the SDK's exporter makes them.
const (
	retryInitial    = 5 * time.Second
	retryMax        = 30 * time.Second
	retryMaxElapsed = time.Minute
)

// send posts body, again after a back-off while the failure is
// retryable, until ctx ends, Shutdown, or retryMaxElapsed.
func (e *exporter) send(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-e.stop:
			cancel()
		}
	}()
	start, interval := time.Now(), e.retry
	for {
		err := e.post(ctx, body)
		r, ok := err.(*retryable)
		switch {
		case !ok:
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case time.Since(start) > retryMaxElapsed:
			return fmt.Errorf("max retry time elapsed: %w", err)
		case time.Since(start)+r.throttle > retryMaxElapsed:
			return fmt.Errorf("max retry time would elapse: %w", err)
		}
		// The interval randomized by half of it either way, as the SDK's
		// back-off does.
		delay := max(r.throttle, time.Duration(float64(interval)*(0.5+rand.Float64())))
		interval = min(interval*3/2, retryMax)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// post sends body once.
func (e *exporter) post(ctx context.Context, body []byte) error {
	payload, encoding := body, ""
	if e.cfg.compression {
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		gz.Write(body)
		if err := gz.Close(); err != nil {
			return err
		}
		payload, encoding = b.Bytes(), "gzip"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "OTel OTLP Exporter Go/"+otel.Version())
	for k, v := range e.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := e.client.Do(req)
	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Temporary() {
		return &retryable{err: err}
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(http.MaxBytesReader(nil, resp.Body, maxResponseBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("response body too large: exceeded %d bytes", tooBig.Limit)
	}
	if err != nil {
		return err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return partialSuccess(resp.Header.Get("Content-Type"), data)
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = "(empty)"
	}
	bodyErr := fmt.Errorf("body: %s", msg)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &retryable{throttle: retryAfter(resp.Header.Get("Retry-After")), err: bodyErr}
	}
	return fmt.Errorf("failed to send to %s: %s (%w)", e.cfg.url, resp.Status, bodyErr)
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		if s > int64(1<<63-1)/int64(time.Second) {
			return time.Duration(1<<63 - 1)
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess is the error of a successful answer that rejected spans:
// its ExportTraceServiceResponse's partial_success (field 1: the number
// of rejected spans, field 1, and a message, field 2), in protobuf or
// JSON as the receiver answered.
func partialSuccess(contentType string, data []byte) error {
	var rejected int64
	var msg string
	switch {
	case len(data) == 0:
		return nil
	case contentType == "application/x-protobuf":
		ps, err := protoField(data, 1)
		if err == nil && ps != nil {
			var n []byte
			if n, err = protoField(ps, 1); err == nil && n != nil {
				v, _ := protowire.ConsumeVarint(n)
				rejected = int64(v)
			}
			var m []byte
			if m, err = protoField(ps, 2); err == nil {
				msg = string(m)
			}
		}
		if err != nil {
			return err
		}
	case contentType == "application/json":
		var r struct {
			PartialSuccess *struct {
				RejectedSpans json.Number `json:"rejectedSpans"`
				ErrorMessage  string      `json:"errorMessage"`
			} `json:"partialSuccess"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		if r.PartialSuccess != nil {
			rejected, _ = strconv.ParseInt(strings.Trim(string(r.PartialSuccess.RejectedSpans), `"`), 10, 64)
			msg = r.PartialSuccess.ErrorMessage
		}
	default:
		return nil
	}
	if rejected == 0 && msg == "" {
		return nil
	}
	if msg == "" {
		msg = "empty message"
	}
	return fmt.Errorf("OTLP partial success: %s (%d spans rejected)", msg, rejected)
}

// protoField returns the last occurrence of field num in message b: the
// bytes of a length-delimited field, the varint bytes of a varint one
// (nil: absent).
func protoField(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			var m int
			v, m = protowire.ConsumeBytes(b)
			l = m
		case protowire.VarintType:
			_, l = protowire.ConsumeVarint(b)
			if l >= 0 {
				v = b[:l]
			}
		default:
			l = protowire.ConsumeFieldValue(n, typ, b)
		}
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		if n == num {
			out = v
		}
		b = b[l:]
	}
	return out, nil
}
