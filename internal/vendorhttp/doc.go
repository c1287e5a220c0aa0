// Package vendorhttp is the HTTP plumbing every cloud vendor client of
// boxctl shares: one Client per control plane, built with New from the
// vendor's fixed Config and the caller's Options, that sends JSON calls
// through go-retryablehttp and turns a non-success answer into an
// *APIError.
//
// # Retries
//
// A call is retried a bounded number of times (WithRetry), waiting with
// exponential backoff and jitter between the bounds, or as long as the
// server's Retry-After asked (capped at the upper bound). Config.RetryAfter
// reads vendor-specific variants (Daytona's Retry-After-<throttler>).
//
// What is retried depends on whether repeating the call is safe:
//
//   - 429 Too Many Requests, and a connection that was never made, are
//     retried for every call: the server surely did nothing.
//   - 5xx answers and other network errors are retried only for an
//     idempotent call: GET, HEAD, OPTIONS, PUT and DELETE, or one marked
//     Call.Idempotent. A create that may have succeeded is never repeated
//     here; the vendor client looks the box up first and decides.
//
// After the last attempt the last answer is what the call returns (an
// *APIError with its status, code, message and Retry-After), never a
// generic "giving up" error.
//
// # Dialling
//
// Resolve makes a transport send every request for a domain and its
// subdomains to one address, as curl's --resolve does: how a client
// reaches a local emulator that serves {port}-{id}.{domain} by host name.
//
// A Client is safe for concurrent use. Header values (API keys) are sent,
// never logged, and never part of an error.
package vendorhttp
