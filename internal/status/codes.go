package status

// Code is a reason's stable cause, in CamelCase, as a Kubernetes condition
// pairs its reason with a message: the Signal says what was judged, the
// Code why it came out as it did, and the Detail says it in words for
// people. Tools, the controller, its Events and the tests steer by Signal,
// Code, Subject and OK, never by the words: the words may be reworded in
// any release, a Code only with a new Schema.
//
// A status written by a release before codes existed has none (""): a
// reader comparing two statuses across such a rollout sees a change once.
type Code string

// The plan's codes, each of one step or gate (its Signal: codeSignal).
const (
	CodePlanPanicked Code = "PlanPanicked"

	CodeRecordsUnprotected Code = "RecordsUnprotected"

	CodeNoEtcd      Code = "NoEtcd"
	CodeEtcdPresent Code = "EtcdPresent"

	CodeNoneEligible   Code = "NoneEligible"
	CodeTooFewEligible Code = "TooFewEligible"
	CodeEnoughEligible Code = "EnoughEligible"

	CodeFleetWideFault   Code = "FleetWideFault"
	CodeNoFleetWideFault Code = "NoFleetWideFault"

	CodeNoSlowVoterLinks   Code = "NoSlowVoterLinks"
	CodeTooManyVoters      Code = "TooManyVoters"
	CodeNoMinorityCover    Code = "NoMinorityCover"
	CodeNetworkUnsound     Code = "NetworkUnsound"
	CodeSlowLinksExplained Code = "SlowLinksExplained"
	CodeRoundTripsLagging  Code = "RoundTripsLagging"

	CodeNoneImplicated     Code = "NoneImplicated"
	CodeVotersTied         Code = "VotersTied"
	CodeMostSlowLinks      Code = "MostSlowLinks"
	CodeNoneOwnImplicated  Code = "NoneOwnImplicated"
	CodeAllVotersFit       Code = "AllVotersFit"
	CodeUnfitByLinksAlone  Code = "UnfitByLinksAlone"
	CodeVotersUnknown      Code = "VotersUnknown"
	CodeFurthestOverLimits Code = "FurthestOverLimits"
	CodeAllUnfitPinned     Code = "AllUnfitPinned"

	CodePinnedOnSlowLinks Code = "PinnedOnSlowLinks"
	CodePinnedPassedOver  Code = "PinnedPassedOver"

	CodeNoStandby           Code = "NoStandby"
	CodeCandidateChosen     Code = "CandidateChosen"
	CodeNoFitStandby        Code = "NoFitStandby"
	CodeCandidateFit        Code = "CandidateFit"
	CodeCandidateUnfit      Code = "CandidateUnfit"
	CodeCandidateUnknown    Code = "CandidateUnknown"
	CodeCandidateUnmeasured Code = "CandidateUnmeasured"

	CodeVoterUnreported        Code = "VoterUnreported"
	CodeLeavingVoterUnreported Code = "LeavingVoterUnreported"
	CodeAllReported            Code = "AllReported"

	CodeNoLeader           Code = "NoLeader"
	CodeLeaderlessInWindow Code = "LeaderlessInWindow"
	CodeLeaderThroughout   Code = "LeaderThroughout"

	CodeLearnerPresent Code = "LearnerPresent"
	CodeNoLearner      Code = "NoLearner"

	CodeVoterCutOff               Code = "VoterCutOff"
	CodePeersDisconnected         Code = "PeersDisconnected"
	CodePeersDisconnectedInWindow Code = "PeersDisconnectedInWindow"
	CodeAllConnected              Code = "AllConnected"

	CodeMembersAtTarget  Code = "MembersAtTarget"
	CodeMembersOffTarget Code = "MembersOffTarget"

	CodeCooldownRunning Code = "CooldownRunning"
	CodeCooldownOver    Code = "CooldownOver"

	CodeSwapSteady  Code = "SwapSteady"
	CodeSwapWaiting Code = "SwapWaiting"
)

// codeSignal is the step or gate each of the plan's codes belongs to: a
// reason's Signal follows from its Code, so the two never disagree.
var codeSignal = map[Code]string{
	CodePlanPanicked:       StepPlan,
	CodeRecordsUnprotected: GateProtected,
	CodeNoEtcd:             StepEtcd, CodeEtcdPresent: StepEtcd,
	CodeNoneEligible: StepEligible, CodeTooFewEligible: StepEligible, CodeEnoughEligible: StepEligible,
	CodeFleetWideFault: StepFleetWide, CodeNoFleetWideFault: StepFleetWide,
	CodeNoSlowVoterLinks: StepAttribution, CodeTooManyVoters: StepAttribution, CodeNoMinorityCover: StepAttribution,
	CodeNetworkUnsound: StepAttribution, CodeSlowLinksExplained: StepAttribution, CodeRoundTripsLagging: StepAttribution,
	CodeNoneImplicated: StepReplace, CodeVotersTied: StepReplace, CodeMostSlowLinks: StepReplace,
	CodeNoneOwnImplicated: StepReplace, CodeAllVotersFit: StepReplace, CodeUnfitByLinksAlone: StepReplace,
	CodeVotersUnknown: StepReplace, CodeFurthestOverLimits: StepReplace, CodeAllUnfitPinned: StepReplace,
	CodePinnedOnSlowLinks: StepPinned, CodePinnedPassedOver: StepPinned,
	CodeNoStandby: StepCandidate, CodeNoFitStandby: StepCandidate, CodeCandidateChosen: StepCandidate, CodeCandidateFit: StepCandidate,
	CodeCandidateUnfit: StepCandidate, CodeCandidateUnknown: StepCandidate, CodeCandidateUnmeasured: StepCandidate,
	CodeVoterUnreported: GateReported, CodeLeavingVoterUnreported: GateReported, CodeAllReported: GateReported,
	CodeNoLeader: GateLeader, CodeLeaderlessInWindow: GateLeader, CodeLeaderThroughout: GateLeader,
	CodeLearnerPresent: GateLearner, CodeNoLearner: GateLearner,
	CodeVoterCutOff: GateConnected, CodePeersDisconnected: GateConnected, CodePeersDisconnectedInWindow: GateConnected,
	CodeAllConnected:    GateConnected,
	CodeMembersAtTarget: GateMembers, CodeMembersOffTarget: GateMembers,
	CodeCooldownRunning: GateCooldown, CodeCooldownOver: GateCooldown,
	CodeSwapSteady: StepSteady, CodeSwapWaiting: StepSteady,
}

// The codes of a host's reasons. One code may serve several signals: the
// Signal says which reading, the Code what became of it.
const (
	CodeWithinLimit     Code = "WithinLimit"     // measured, inside its limit
	CodeOverLimit       Code = "OverLimit"       // measured, over its limit
	CodeNotMeasured     Code = "NotMeasured"     // nothing measured in the window
	CodeReadingFailed   Code = "ReadingFailed"   // the reading failed
	CodeReported        Code = "Reported"        // a count reported, judged against no limit
	CodeTooFewObserved  Code = "TooFewObserved"  // a histogram with no more observations than the window forgives
	CodeSomeScrapesLost Code = "SomeScrapesLost" // etcd: some scrapes failed, judged from the others
	CodeMeasuredByOther Code = "MeasuredByOther" // a link judged from its other end
	CodeHeldAgainstBy   Code = "HeldAgainstBy"   // a link from its other end held against that end, which does not vote

	CodeRecordMissing    Code = "RecordMissing"    // entry: no record
	CodeRecordUnreadable Code = "RecordUnreadable" // entry: the record cannot be read
	CodeJudgingPanicked  Code = "JudgingPanicked"  // entry: judging it panicked

	CodeRecordFull          Code = "RecordFull"          // record: shrunk to fit its cap
	CodeWriteRefused        Code = "WriteRefused"        // record: the API server refused the last write
	CodeMemberClaimed       Code = "MemberClaimed"       // record: its etcd member is another record's
	CodeRecordWithheld      Code = "RecordWithheld"      // record: the probe writes no samples
	CodeWithheldUnprotected Code = "WithheldUnprotected" // record: a withheld marker seen while unprotected

	CodeWindowFull  Code = "WindowFull"  // samples: a full window
	CodeWindowShort Code = "WindowShort" // samples: fewer than a window

	CodeEntryFresh Code = "EntryFresh" // entry_unchanged: changed recently enough
	CodeEntryStale Code = "EntryStale" // entry_unchanged: the probe stopped reporting

	CodeWired      Code = "Wired"      // link: the default route leaves by a wired interface
	CodeWifi       Code = "Wifi"       // link: by Wi-Fi
	CodeLinkUnseen Code = "LinkUnseen" // link: by an interface whose kind cannot be seen

	CodeSkippedBySetting Code = "SkippedBySetting" // fdatasync: skipped by fsync_skip_reason
	CodeSkippedByProbe   Code = "SkippedByProbe"   // fdatasync: skipped by the probe
	CodeMemoryFilesystem Code = "MemoryFilesystem" // fdatasync: taken on a memory filesystem
)

// Leaving reports the code of the step that names the voter a swap takes
// out: the decision's deciding step when it swaps.
func (c Code) Leaving() bool { return c == CodeMostSlowLinks || c == CodeFurthestOverLimits }

// Candidacy reports the code of one standby's candidacy: whether it is fit
// to come in, not whether the swap may go ahead (another may be chosen).
func (c Code) Candidacy() bool {
	switch c {
	case CodeCandidateChosen, CodeCandidateFit, CodeCandidateUnfit, CodeCandidateUnknown, CodeCandidateUnmeasured:
		return true
	}
	return false
}

// SignalOfCode is the step or gate a plan's code belongs to, "" for a
// host's.
func SignalOfCode(c Code) string { return codeSignal[c] }
