// Package pgqueue is the durable jobs.Queue: background runs, resumes and
// continuations are River jobs (github.com/riverqueue/river) in the
// PostgreSQL database that holds the runs, inserted in the transaction
// that records the run queued, so that a run is never queued without its
// job nor a job left without its run.
//
// Every replica that opens a Queue works jobs with Config.Workers workers
// (and a River queue per agent of Config.AgentConcurrency, with that many
// workers); any replica's worker drives any replica's run. River elects a
// leader among the replicas, whose rescuer gives the job of a worker that
// died (SIGKILL, a lost machine) to another once it has been running for
// Config.RescueAfter; that worker continues the run with Drive's
// semantics (agents.Runtime.Drive through jobs.Work): calls that finished
// are not repeated, an interrupted read runs again, and an interrupted
// write pauses for a person's decision, never run again silently. River's
// rescuer looks every 30 seconds and a new leader is elected within about
// 15 seconds of the old one's death, so a dead replica's run goes on
// within RescueAfter plus about 45 seconds at worst.
//
// A graceful stop (Stop) stops fetching, waits for the runs in flight and
// then interrupts them: an interrupted run stays running in the store and
// its job is retried at once by another replica.
//
// River's tables are migrated with River's own migrator (rivermigrate),
// under an advisory lock so that replicas starting together do not race.
// Only a program that uses PostgreSQL state links this package, and with
// it River. The eval samples' queue is package evalqueue's, which a
// service does not link.
package pgqueue
