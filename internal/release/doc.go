// Package release builds boxctl's released files: a tar.gz archive of
// boxctl per platform (Linux and macOS on amd64 and arm64), each holding
// the static box-bridge for both Linux architectures beside boxctl (named
// as boximage.BridgeName names them, so that `boxctl build --platform`
// finds them), an archive of box-bridge alone per Linux architecture,
// SHA256SUMS over all of them and a CycloneDX SBOM of the Go modules the
// binaries hold, read from the binaries themselves.
//
// The files are reproducible: from the same commit, Go toolchain and
// options, two runs write the same bytes. Binaries are built with
// -trimpath, CGO off, no VCS stamp (the version and commit come from the
// caller's -ldflags) and fixed GOAMD64/GOARM64 levels; archive entries are
// sorted, owned by uid 0 and dated Options.Time, with fixed modes; the
// gzip header carries no name and no time; the SBOM's timestamp is
// Options.Time and its serial number is derived from the archives' sums.
//
// The Makefile's `make release` runs it through cmd/release.
package release
