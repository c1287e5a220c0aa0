package boximage

// WriteELF lets the package's external tests write ELF headers.
var WriteELF = writeELF
