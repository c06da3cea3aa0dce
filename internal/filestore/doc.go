// Package filestore is an agents.Store kept in files, one JSON file per run
// in a directory, so that a run paused by one process can be resumed by
// another on the same machine without a database. aidgen run uses it when
// an application keeps its state in memory (service.state.kind "memory"):
// the service itself would hold runs in its memory, but a command line has
// no process that outlives the pause.
//
// It keeps the agents.Store contract (package agentstoretest) across
// processes, not only goroutines: every write is a read-modify-write of the
// run's file under an exclusive flock(2) on the directory's lock file, and
// the new contents replace the old by rename(2), after an fsync, so that a
// reader never sees half a file and a crash never leaves one. A call is
// therefore recorded before it runs and gets at most one result, whichever
// process writes it, and of two processes resuming the same pause exactly
// one wins. flock is released by the kernel when a process dies, so a killed
// command never leaves the directory locked.
//
// Strings a model or a tool wrote into a call record (call ids, tool names,
// arguments, observations) are kept as bytes and round-trip exactly, NUL
// bytes and invalid UTF-8 included; a checkpoint is kept as
// agents.MarshalCheckpoint writes it.
//
// It is not for a service with replicas on several machines (use
// runtime/agents/pgstore), nor for many concurrent runs: one lock serialises
// every write to the directory, and each write rewrites the run's file.
// It does not expire or delete finished runs. On systems without flock(2)
// (Windows among them) Open fails with a *kind.DeferredError naming the
// feature.
package filestore
