package agents

import "sync/atomic"

// runSizes remembers how long an agent's runs were, so that a new run's
// thread, checkpointed messages and steps are made at the size they will
// reach rather than doubled up to it: three copies of a 41-message thread
// grown one append at a time were 40 % of the bytes of a 20-step run
// (BenchmarkStep). Each figure is a decaying maximum: it rises at once to a
// longer run's and falls by an eighth a run, so that runs of the usual
// length find room and one long run does not oversize the many after it
// for long. The figures are hints; racing updates lose nothing but room.
type runSizes struct {
	msgs  atomic.Int32 // messages a run added to its thread
	steps atomic.Int32 // steps a run took
}

// maxSizeHint bounds a hint, so that an agent whose runs are very long
// starts them at a reasonable size and grows them as before.
const maxSizeHint = 128

func decayingMax(h *atomic.Int32, n int) {
	n = min(n, maxSizeHint)
	if old := int(h.Load()); n < old {
		n = old - (old-n+7)/8
	}
	h.Store(int32(n))
}

// observe records a finished run's sizes: added messages and steps.
func (s *runSizes) observe(msgs, steps int) {
	decayingMax(&s.msgs, msgs)
	decayingMax(&s.steps, steps)
}
