package agents

import "context"

// StepStore is a Store that writes a step's checkpoint and records the
// calls about to run in one operation: one round trip to a database
// instead of one per write. The runtime uses it when its store has it, and
// only for calls whose recovery is the same whether or not they started
// (reads: Drive runs a recorded read without a result again, as it runs
// an unrecorded one), so that the contract of Store is unchanged: a call is
// recorded before it runs and gets exactly one result.
type StepStore interface {
	Store
	// UpdateRunRecordCalls is UpdateRun(rec) followed by RecordCall of each
	// call, all or nothing: a *ConflictError or *RunNotFoundError of the
	// update records no call, and a *CallExistsError leaves the run as it
	// was.
	UpdateRunRecordCalls(ctx context.Context, rec RunRecord, calls []CallRecord) (RunRecord, error)
}
