// Package ecrfake is a local fake of the Amazon ECR API for tests. It speaks
// ECR's real wire protocol (AWS JSON 1.1: POST / with X-Amz-Target
// "AmazonEC2ContainerRegistry_V20150921.<Operation>", content type
// application/x-amz-json-1.1, errors as {"__type", "message"}), so the
// AWS SDK talks to it with only a custom endpoint. Repositories it hands out
// live in a real OCI registry given at construction, and its authorization
// tokens log in to that registry.
//
// Implemented operations: GetAuthorizationToken, DescribeRepositories,
// CreateRepository. Product code never imports this package.
package ecrfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

const targetPrefix = "AmazonEC2ContainerRegistry_V20150921."

// Options configures a Server.
type Options struct {
	// Registry is the OCI registry (host:port) repositories live in. Required.
	Registry string
	// AccessKeyID is the only AWS access key the server accepts (checked in
	// the SigV4 Authorization header). Empty accepts any signed request.
	AccessKeyID string
	// AccountID is the registry id. Default "123456789012".
	AccountID string
	// Region appears in ARNs. Default "us-east-1".
	Region string
	// Password is what authorization tokens carry for user "AWS". Default
	// a fixed test value.
	Password string
}

// Server is the fake ECR API; it is an http.Handler, safe for concurrent use.
type Server struct {
	opts  Options
	mu    sync.Mutex
	repos map[string]repository
	calls map[string]int
}

type repository struct {
	RepositoryArn              string         `json:"repositoryArn"`
	RegistryID                 string         `json:"registryId"`
	RepositoryName             string         `json:"repositoryName"`
	RepositoryURI              string         `json:"repositoryUri"`
	CreatedAt                  float64        `json:"createdAt"`
	ImageTagMutability         string         `json:"imageTagMutability"`
	ImageScanningConfiguration map[string]any `json:"imageScanningConfiguration"`
	EncryptionConfiguration    map[string]any `json:"encryptionConfiguration"`
}

// New returns a fake ECR API.
func New(opts Options) *Server {
	if opts.AccountID == "" {
		opts.AccountID = "123456789012"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Password == "" {
		opts.Password = "ecr-fake-token"
	}
	return &Server{opts: opts, repos: map[string]repository{}, calls: map[string]int{}}
}

// Calls returns how many times an operation was called.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Login returns the registry login the fake's tokens carry.
func (s *Server) Login() (user, password string) { return "AWS", s.opts.Password }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("%d", time.Now().UnixNano()))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]string{"__type": typ, "message": msg})
}

var credRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/[^/]+/ecr/aws4_request`)

var nameRE = regexp.MustCompile(`^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

// ServeHTTP answers one ECR API call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	m := credRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		writeError(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return
	}
	if s.opts.AccessKeyID != "" && m[1] != s.opts.AccessKeyID {
		writeError(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeError(w, http.StatusBadRequest, "SerializationException", "unexpected content type "+ct)
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if !ok {
		writeError(w, http.StatusBadRequest, "UnknownOperationException", "")
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	switch op {
	case "GetAuthorizationToken":
		token := base64.StdEncoding.EncodeToString([]byte("AWS:" + s.opts.Password))
		writeJSON(w, http.StatusOK, map[string]any{"authorizationData": []map[string]any{{
			"authorizationToken": token,
			"expiresAt":          float64(time.Now().Add(12 * time.Hour).Unix()),
			"proxyEndpoint":      "http://" + s.opts.Registry,
		}}})
	case "DescribeRepositories":
		var names []string
		if raw, ok := body["repositoryNames"]; ok {
			if err := json.Unmarshal(raw, &names); err != nil {
				writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
				return
			}
		}
		out := []repository{}
		for _, n := range names {
			repo, ok := s.repos[n]
			if !ok {
				writeError(w, http.StatusBadRequest, "RepositoryNotFoundException",
					fmt.Sprintf("The repository with name '%s' does not exist in the registry with id '%s'", n, s.opts.AccountID))
				return
			}
			out = append(out, repo)
		}
		if len(names) == 0 {
			for _, repo := range s.repos {
				out = append(out, repo)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"repositories": out})
	case "CreateRepository":
		var name string
		if err := json.Unmarshal(body["repositoryName"], &name); err != nil || !nameRE.MatchString(name) || len(name) < 2 {
			writeError(w, http.StatusBadRequest, "InvalidParameterException",
				fmt.Sprintf("Invalid parameter at 'repositoryName' failed to satisfy constraint: %q", name))
			return
		}
		if _, ok := s.repos[name]; ok {
			writeError(w, http.StatusBadRequest, "RepositoryAlreadyExistsException",
				fmt.Sprintf("The repository with name '%s' already exists in the registry with id '%s'", name, s.opts.AccountID))
			return
		}
		mut := "MUTABLE"
		if raw, ok := body["imageTagMutability"]; ok {
			_ = json.Unmarshal(raw, &mut)
		}
		repo := repository{
			RepositoryArn:              fmt.Sprintf("arn:aws:ecr:%s:%s:repository/%s", s.opts.Region, s.opts.AccountID, name),
			RegistryID:                 s.opts.AccountID,
			RepositoryName:             name,
			RepositoryURI:              s.opts.Registry + "/" + name,
			CreatedAt:                  float64(time.Now().Unix()),
			ImageTagMutability:         mut,
			ImageScanningConfiguration: map[string]any{"scanOnPush": false},
			EncryptionConfiguration:    map[string]any{"encryptionType": "AES256"},
		}
		s.repos[name] = repo
		writeJSON(w, http.StatusOK, map[string]any{"repository": repo})
	default:
		writeError(w, http.StatusBadRequest, "UnknownOperationException", "")
	}
}
