// Package depcheck holds only a test: it keeps imports flowing the one way
// the architecture allows (cmd -> everything; provider/sandbox -> provider,
// vendors, pins; conformance -> provider/sandbox, vendors, boximage;
// boximage -> pins; the bridge imports none of the client side), keeps the
// box-bridge binary free of the Docker client, BuildKit and cobra, and keeps
// product code from importing test fakes.
package depcheck
