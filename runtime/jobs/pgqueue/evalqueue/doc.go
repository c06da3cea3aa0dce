// Package evalqueue distributes an eval's samples over workers: each
// sample is a River job (github.com/riverqueue/river) in the PostgreSQL
// database of package pgqueue's queue of runs, whose tables it shares;
// aidgen eval --queue enqueues a batch and waits for its results, and
// aidgen worker runs the samples (OpenEvals, Evals.Enqueue, Evals.Wait).
// A worker that dies has its sample rescued and run again by another,
// counted once.
//
// It is apart from package pgqueue, which a service with PostgreSQL state
// links, so that a service, which runs no eval, does not link the eval
// package (its samples and metrics) and gonum's statistics.
package evalqueue
