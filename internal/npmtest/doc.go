// Package npmtest installs npm packages at exact versions for tests, with
// the test bed's Node toolchain and npm cache (see internal/testbed).
//
// Install puts the package in a fresh temporary directory of the test, so
// tests never share or leak an installation; the persistent npm cache makes
// repeated installs cheap. An installation is checked against the version
// asked for, because npm may otherwise pick another version quietly (for
// example one whose engines match an older Node).
package npmtest
