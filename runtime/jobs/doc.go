// Package jobs runs agents in the background: a run, a resume or a
// continuation is recorded with status queued (agents.Runtime.Submit and
// its siblings) and driven by a worker, whose count and per-agent limits
// are configured here (Config).
//
// A Queue is what the service hands background requests to. Two exist:
// Local, in this package, drives queued runs in this process's goroutines
// and keeps nothing beyond it (the memory-state default, which links no
// job queue); pgqueue, its subpackage, keeps jobs in PostgreSQL with River
// on the database that holds the runs, so that any replica's workers drive
// them and a job whose worker died is rescued and continued with Drive's
// semantics (agents.Runtime.Drive). The rule of what a worker does with a
// queued run, and when its job is done, is here (Work), for both.
//
// It is not a job queue of its own: the in-process one is a semaphore per
// agent in front of goroutines, and the durable one is River's.
package jobs
