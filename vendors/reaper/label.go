package reaper

import "github.com/tangle-network/boxctl/vendors/boxmeta"

// RunTagFilter is the vendors.Vendor.List filter of the boxes of run tag
// tag (boxmeta.LabelRunTag).
func RunTagFilter(tag string) map[string]string { return map[string]string{boxmeta.LabelRunTag: tag} }
