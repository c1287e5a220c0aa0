package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"

	"github.com/tangle-network/boxctl/bridge/openapi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

// TestOpenAPI_golden keeps the served document equal to the one built
// from the wire types; -update rewrites it.
func TestOpenAPI_golden(t *testing.T) {
	doc, err := openapi.Document()
	if err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, "openapi.json", doc)
	v := newEnv(t, config{})
	resp := v.do(t, "GET", "/openapi.json", "")
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(got, openAPIDocument) {
		t.Errorf("GET /openapi.json = %d with %d bytes, want the document", resp.StatusCode, len(got))
	}
	if errs := docValidator(t).ValidateDocument; errs != nil {
		if ok, verrs := errs(); !ok {
			t.Errorf("the document is not valid OpenAPI 3.1: %v", verrs)
		}
	}
}

var (
	openAPIOnce sync.Once
	openAPIV    validator.Validator
	openAPIErr  error
	openAPIMu   sync.Mutex // the validator is used by one check at a time
)

func docValidator(t *testing.T) validator.Validator {
	t.Helper()
	openAPIOnce.Do(func() {
		doc, err := libopenapi.NewDocument(openAPIDocument)
		if err != nil {
			openAPIErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			openAPIErr = fmt.Errorf("%v", errs)
			return
		}
		openAPIV = v
	})
	if openAPIErr != nil {
		t.Fatalf("load openapi.json: %v", openAPIErr)
	}
	return openAPIV
}

// exchange is one request the server answered, as a test saw it.
type exchange struct {
	method string
	url    *url.URL
	header http.Header
	status int
	rh     http.Header
	body   []byte
}

// recorder keeps what the server answered while passing it on.
type recorder struct {
	http.ResponseWriter
	x    *exchange
	body bytes.Buffer
}

// maxRecorded bounds the body kept of one answer (an event stream's
// frames are not checked against schemas).
const maxRecorded = 4 << 20

func (r *recorder) WriteHeader(code int) {
	if r.x.status == 0 {
		r.x.status, r.x.rh = code, r.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.x.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.body.Len() < maxRecorded {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// checked serves h and, when the test ends, validates every answer
// against openapi.json: its route and status must be documented, its
// body must match the schema (no field the document lacks), and its
// documented headers must be there.
func checked(t *testing.T, h http.Handler) http.Handler {
	var mu sync.Mutex
	var seen []*exchange
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range seen {
			if err := validateExchange(t, x); err != nil {
				t.Errorf("%s %s answered %d, which openapi.json does not allow: %v", x.method, x.url.Path, x.status, err)
			}
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{method: r.Method, url: r.URL, header: r.Header.Clone()}
		rec := &recorder{ResponseWriter: w, x: x}
		h.ServeHTTP(rec, r)
		if x.status == 0 {
			x.status, x.rh = http.StatusOK, w.Header().Clone()
		}
		x.body = rec.body.Bytes()
		mu.Lock()
		seen = append(seen, x)
		mu.Unlock()
	})
}

func validateExchange(t *testing.T, x *exchange) error {
	v := docValidator(t)
	req := &http.Request{Method: x.method, URL: &url.URL{Path: x.url.Path, RawQuery: x.url.RawQuery}, Header: x.header}
	resp := &http.Response{StatusCode: x.status, Header: x.rh, Body: io.NopCloser(bytes.NewReader(x.body)), Request: req}
	if strings.HasPrefix(x.rh.Get("Content-Type"), "text/event-stream") {
		// A stream's frames are checked by the stream tests; here only
		// that the route streams.
		resp.Body = io.NopCloser(strings.NewReader(""))
	}
	openAPIMu.Lock()
	ok, errs := v.ValidateHttpResponse(req, resp)
	openAPIMu.Unlock()
	if ok {
		return nil
	}
	// A path or method the bridge does not serve is answered with an
	// error (401 first, without the bearer) the document cannot list
	// under a route.
	if undocumentedRoute(errs) && (x.status == http.StatusNotFound || x.status == http.StatusMethodNotAllowed ||
		x.status == http.StatusUnauthorized) {
		var e wire.ErrorResponse
		dec := json.NewDecoder(bytes.NewReader(x.body))
		dec.DisallowUnknownFields()
		if dec.Decode(&e) == nil && e.Error.Type != "" {
			return nil
		}
	}
	var msgs []string
	for _, e := range errs {
		m := e.Message + ": " + e.Reason
		for _, f := range e.SchemaValidationErrors {
			m += "; " + f.Reason + " at " + f.FieldPath
		}
		msgs = append(msgs, m)
	}
	return fmt.Errorf("%s", strings.Join(msgs, " | "))
}

func undocumentedRoute(errs []*verrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == helpers.PathValidation || e.ValidationSubType == helpers.ValidationMissingOperation ||
			e.ValidationType == helpers.ValidationMissingOperation {
			return true
		}
	}
	return false
}
