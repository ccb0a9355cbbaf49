package decide

import "github.com/fleet-role/fleet-role/internal/status"

// DecidePanicking is Decide with judging node panicking with value.
func DecidePanicking(in Input, node string, value any) status.Status {
	return decide(in, func(n string) {
		if n == node {
			panic(value)
		}
	})
}
