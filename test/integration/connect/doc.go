// Package connect holds internal/connect's Measure to a silent peer and a
// refused one in a network namespace of its own (root).
package connect
