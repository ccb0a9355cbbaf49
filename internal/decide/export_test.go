package decide

// DecidePanicking is Decide with judging node panicking with value.
func DecidePanicking(in Input, node string, value any) Status {
	return decide(in, func(n string) {
		if n == node {
			panic(value)
		}
	})
}

// Clip is clip, for tests.
var Clip = clip

// IndentedLen and Indent are indentedLen and indent, for tests.
var (
	IndentedLen = indentedLen
	Indent      = indent
)
