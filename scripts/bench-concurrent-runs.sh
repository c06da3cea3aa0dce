#!/bin/sh
# bench-concurrent-runs.sh: 100 and 1,000 concurrent three-step runs on
# the in-memory store and on PostgreSQL (pgstore's BenchmarkConcurrentRuns),
# without the race detector, reporting runs/s, the per-step overhead (p50,
# p99), store time per step, and on PostgreSQL round trips and pool waits.
#
#   scripts/bench-concurrent-runs.sh [COUNT]
#
# The DSN comes from AID_TEST_DATABASE_URL (or /tmp/pgdsn when it is
# unset); without one the benchmark skips.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${AID_TEST_DATABASE_URL:-}" ] && [ -s /tmp/pgdsn ]; then
	AID_TEST_DATABASE_URL=$(cat /tmp/pgdsn)
	export AID_TEST_DATABASE_URL
fi
exec go test -run '^$' -bench '^BenchmarkConcurrentRuns$' -benchtime 3x -count "${1:-3}" ./runtime/agents/pgstore/
