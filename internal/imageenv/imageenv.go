// Package imageenv names the environment the box image gives the programs
// in it to find what the image installed: the image renderer (boximage)
// sets it, and the bridge's harness adapters read it. The variables of a
// box's lifetime, which the vendors set too, are vendors/boxmeta's.
package imageenv

// HarnessRoot is the variable the image sets to the directory that holds
// one install prefix per harness (<root>/<harness name>); harness adapters
// read it to find what the image installed beside a CLI.
const HarnessRoot = "BOX_HARNESS_ROOT"
