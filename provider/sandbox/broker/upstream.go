package broker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
)

// Auth is how an upstream takes its credential.
type Auth string

// Auth styles.
const (
	// AuthAsPresented puts the key where the harness put its token: the
	// Router's style, which takes any of the others.
	AuthAsPresented Auth = "as-presented"
	// AuthBearer is "Authorization: Bearer KEY" (OpenAI).
	AuthBearer Auth = "bearer"
	// AuthAPIKey is "x-api-key: KEY" (Anthropic).
	AuthAPIKey Auth = "x-api-key"
	// AuthGoogAPIKey is "x-goog-api-key: KEY" (Gemini).
	AuthGoogAPIKey Auth = "x-goog-api-key"
)

// Upstream names.
const (
	Router    = "router"
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// The providers' public API base URLs.
const (
	AnthropicURL = "https://api.anthropic.com"
	OpenAIURL    = "https://api.openai.com"
	GeminiURL    = "https://generativelanguage.googleapis.com"
)

// Upstream is where a box's model requests go, with the credential the
// broker adds. Key is a secret: its String, LogValue, GoString and JSON
// forms leave it out.
type Upstream struct {
	// Name names it for grants: Router, Anthropic, OpenAI, Gemini or any
	// other name.
	Name string
	// URL is its base URL: a request's path is joined to it.
	URL string
	// Key is the real credential.
	Key string
	// Auth is how it takes the key.
	Auth Auth
	// Transient upstreams end with their boxes: the revoke of the last
	// grant of one removes it, key and all (a local model endpoint of one
	// box, say).
	Transient bool
}

// ForProvider returns the upstream of a provider's own API (Anthropic,
// OpenAI or Gemini) at its public base URL, or at base when it is not "".
func ForProvider(name, base, key string) (Upstream, error) {
	u := Upstream{Name: name, Key: key}
	switch name {
	case Anthropic:
		u.URL, u.Auth = AnthropicURL, AuthAPIKey
	case OpenAI:
		u.URL, u.Auth = OpenAIURL, AuthBearer
	case Gemini:
		u.URL, u.Auth = GeminiURL, AuthGoogAPIKey
	case Router:
		u.Auth = AuthAsPresented
	default:
		return Upstream{}, fmt.Errorf("broker: unknown upstream %q: want %s, %s, %s or %s", name, Router, Anthropic, OpenAI, Gemini)
	}
	if base != "" {
		u.URL = base
	}
	return u, u.check()
}

func (u Upstream) check() error {
	p, err := url.Parse(u.URL)
	switch {
	case u.Name == "":
		return fmt.Errorf("broker: an upstream needs a name")
	case err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "":
		return fmt.Errorf("broker: upstream %s: its URL must be http(s)://HOST[/PATH]", u.Name)
	case p.User != nil:
		return fmt.Errorf("broker: upstream %s: its URL must not carry credentials", u.Name)
	case u.Key == "":
		return fmt.Errorf("broker: upstream %s: a key is required", u.Name)
	}
	switch u.Auth {
	case AuthAsPresented, AuthBearer, AuthAPIKey, AuthGoogAPIKey:
		return nil
	}
	return fmt.Errorf("broker: upstream %s: unknown auth %q", u.Name, u.Auth)
}

func (u Upstream) String() string { return "upstream(" + u.Name + " " + u.URL + ")" }

// LogValue leaves the key out.
func (u Upstream) LogValue() slog.Value { return slog.StringValue(u.String()) }

// GoString leaves the key out.
func (u Upstream) GoString() string { return u.String() }

// Format leaves the key out, whatever the verb.
func (u Upstream) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(u.String())) }

// MarshalJSON leaves the key out.
func (u Upstream) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"name": u.Name, "url": u.URL, "auth": string(u.Auth)})
}
