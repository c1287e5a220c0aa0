// Package reaper owns what marks a box as boxctl's and who may still want
// it, and removes the boxes nobody wants: the box labels (LabelManaged,
// LabelRunTag, LabelOwner, LabelDeadline), the owner encoding (a process,
// or a user's state), and the label-based reaper that `boxctl gc`,
// sandbox.GC and every vendor's tests run. Like a test-container reaper,
// it tracks no objects: it lists a vendor's boxes by their labels and
// decides from the labels alone.
//
// The label and lifetime names are spelled once, in internal/boxmeta,
// which the vendors package and the image renderer import (they sit below
// this package); this package exports them under their public names.
//
// Reap takes an Options struct (our own component); it talks to a vendor
// only through the vendors.Vendor interface.
package reaper
