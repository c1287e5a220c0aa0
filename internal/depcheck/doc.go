// Package depcheck holds only tests. They keep imports flowing the one
// way the architecture allows (cmd -> everything; provider/sandbox ->
// provider, the vendors interface, pins; conformance -> provider/sandbox,
// vendors, boximage; boximage -> pins and the box labels; vendors/X ->
// vendors; vendors -> its foundations, the box labels (vendors/boxmeta)
// and the process layer (vendors/boxproc), which import nothing of ours;
// the bridge imports none of the client side; bridge/wire nothing of
// ours; internal, shared plumbing and the local model endpoint, for every
// part; the emulators -> their kit, vendors/emukit, which no client
// imports), keep the box-bridge binary free of the Docker client,
// BuildKit and cobra, and keep product code from importing fakes and
// test helpers.
//
// The direction holds for test files too (go list's TestImports and
// XTestImports, attributed to the files that import): a test imports what
// its package may, its package's part's fakes and helpers, and what lies
// below it (provider/sandbox's tests real vendors, a vendor's tests its
// own emulator). The test files that still import upward are listed by
// file in knownUpwardTestImports, which only shrinks.
//
// Fakes and test helpers are listed by name (testOnly), not guessed from
// their names: a package named like one but unlisted fails, and so does a
// listed package that is gone. They follow the rules of their place in
// the tree, plus the extra imports listed for each; a leaf among them
// (internal/polltest, internal/goldentest) imports nothing of ours, and
// every package's tests may import it. A last test keeps
// internal/dockerclient the only constructor of Docker Engine clients.
package depcheck
