package entry

// DecodeReflective is the reader this package had before read.go, the
// oracle of the differential tests.
var DecodeReflective = decodeReflective
