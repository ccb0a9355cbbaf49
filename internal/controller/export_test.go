package controller

import "github.com/fleet-role/fleet-role/internal/decide"

// Remembered is remembered, for the tests of package controller_test.
func Remembered(st *decide.Status) *decide.Status { return remembered(st) }
