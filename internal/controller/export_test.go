package controller

import (
	"crypto/sha256"

	"github.com/fleet-role/fleet-role/internal/decide"
)

// Remembered is remembered, for the tests of package controller_test.
func Remembered(st *decide.Status) *decide.Status { return remembered(st) }

// DigestWithoutTimestamp is digestWithoutTimestamp, for the same tests.
func DigestWithoutTimestamp(st *decide.Status) ([sha256.Size]byte, error) {
	return digestWithoutTimestamp(st)
}
