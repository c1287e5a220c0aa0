// Package baseimage turns a root filesystem tarball into a single-layer OCI
// image and pushes it to a registry. The test bed uses it to publish its
// local Debian + Node base image, since no public registry is reachable.
//
// The image is a pure function of the tarball and the Config: the config
// carries fixed timestamps, so pushing the same tarball twice yields the same
// digest.
package baseimage
