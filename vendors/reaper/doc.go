// Package reaper owns who may still want a box, and removes the boxes
// nobody wants: the owner encoding (a process, or a user's state), the
// run tag filter, and the label-based reaper that `boxctl gc`, sandbox.GC
// and every vendor's tests run. Like a test-container reaper, it tracks no
// objects: it lists a vendor's boxes by their labels and decides from the
// labels alone.
//
// The labels it decides by (boxmeta.LabelManaged, LabelRunTag,
// LabelOwner, LabelDeadline, LabelPool) and their encodings are spelled
// once, in vendors/boxmeta, which every vendor, the image renderer and
// this package import; vendors.Info.RunTag and Info.Owner read the two a
// reaper decides by.
//
// Reap takes an Options struct (our own component); it talks to a vendor
// only through the vendors.Vendor interface.
package reaper
