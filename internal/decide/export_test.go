package decide

// SetJudgeHook makes f run before each host is judged, so that a test can
// make judging one host panic; the function it returns restores the hook.
func SetJudgeHook(f func(node string)) (restore func()) {
	old := judgeHook
	judgeHook = f
	return func() { judgeHook = old }
}

// Clip is clip, for tests.
var Clip = clip

// IndentedLen and Indent are indentedLen and indent, for tests.
var (
	IndentedLen = indentedLen
	Indent      = indent
)
