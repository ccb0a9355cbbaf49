package decide

import "github.com/fleet-role/fleet-role/internal/status"

// code is the host judgement's code: what its variant and outcome say of
// its kind.
func (g *judgement) code() status.Code {
	switch g.variant {
	case vMissing:
		return status.CodeRecordMissing
	case vPanic:
		return status.CodeJudgingPanicked
	case vRefused:
		return status.CodeWriteRefused
	case vShrunk:
		return status.CodeRecordFull
	case vClaimed:
		return status.CodeMemberClaimed
	case vWithheld:
		return status.CodeRecordWithheld
	case vUnprotected:
		return status.CodeWithheldUnprotected
	case vWifi:
		return status.CodeWifi
	case vWired:
		return status.CodeWired
	case vUnseen:
		return status.CodeLinkUnseen
	case vSkippedSetting:
		return status.CodeSkippedBySetting
	case vSkipped:
		return status.CodeSkippedByProbe
	case vMemoryFS:
		return status.CodeMemoryFilesystem
	case vSomeFailed:
		return status.CodeSomeScrapesLost
	case vTooFew:
		return status.CodeTooFewObserved
	case vNone:
		return status.CodeNotMeasured
	case vFailed:
		if g.kind == kindEntry {
			return status.CodeRecordUnreadable
		}
		return status.CodeReadingFailed
	}
	switch g.kind {
	case kindSamples:
		if g.out == pass {
			return status.CodeWindowFull
		}
		return status.CodeWindowShort
	case kindFreshness:
		if g.out == pass {
			return status.CodeEntryFresh
		}
		return status.CodeEntryStale
	}
	switch {
	case g.limit == nil || g.bare:
		return status.CodeReported
	case g.out == pass:
		return status.CodeWithinLimit
	}
	return status.CodeOverLimit
}
