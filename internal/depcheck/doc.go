// Package depcheck holds only tests. They keep imports flowing the one
// way the architecture allows (cmd -> everything; provider/sandbox ->
// provider, the vendors interface, pins; conformance -> provider/sandbox,
// vendors, boximage; boximage -> pins; vendors/X -> vendors; the bridge
// imports none of the client side; bridge/wire nothing of ours; the
// emulators -> their kit, vendors/emukit, which no client imports), keep the
// box-bridge binary free of the Docker client, BuildKit and cobra, and
// keep product code from importing fakes and test helpers.
//
// Fakes and test helpers are listed by name (testOnly), not guessed from
// their names: a package named like one but unlisted fails, and so does a
// listed package that is gone. They follow the rules of their place in
// the tree, plus the extra imports listed for each. A last test keeps
// internal/dockerclient the only constructor of Docker Engine clients.
package depcheck
