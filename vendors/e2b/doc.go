// Package e2b talks to E2B (e2b.dev), a cloud of Firecracker sandboxes.
//
// TemplateClient publishes box images: E2B's template build API (build
// system v2) creates a template (POST /v3/templates), builds it from an
// image in a registry with that registry's credentials, ECR natively
// (POST /v2/templates/{templateID}/builds/{buildID}), and reports the build
// status with its logs (GET /templates/{templateID}/builds/{buildID}/status,
// paged by logsOffset). Calls authenticate with X-API-Key, retry throttling
// (429, honouring Retry-After) and transient failures a bounded number of
// times, and fail with a *TemplateAPIError carrying status, code and
// message, or a *TemplateBuildError for a build that ended in error.
//
// Local fakes of these APIs for tests live in package e2bfake.
package e2b
