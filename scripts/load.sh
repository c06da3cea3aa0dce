#!/usr/bin/env bash
# load.sh — the load benchmark of a generated service, measured from outside
# (internal/loadbench): builds a one-agent application that also exposes an
# alias, with aidgen build and go build; starts the binary and a
# zero-latency OpenAI-compatible mock upstream as their own processes, and
# two floors in front of the same mock (httputil.ReverseProxy, and a proxy
# that also decodes and encodes the JSON); and drives them with vegeta on
# loopback. It prints, for the floors, the agent and the alias, the added
# latency of sequential requests (p50/p99 of service minus
# mock, pair by pair), and at each fixed rate vegeta's errors and latency
# p50/p99 beside the mock's alone, and the service's CPU per request from
# /proc/PID/stat (and the mock's); first in a fresh process, then after it
# has served 200,000 more requests, with its resident set.
#
#   bash scripts/load.sh                                  # rates 500, 1000, 2000/s, 10 s each
#   bash scripts/load.sh -load.rates=1000 -load.duration=30s -load.soak=50000
#   GOMAXPROCS=2 taskset -c 0,1 bash scripts/load.sh      # pin everything to two cores
#
# Each rate is measured in -load.rounds rounds (3 by default): the mock
# alone, then every target in an order that rotates from round to round;
# the summary is the median of the rounds, and each target's CPU is also
# given as a ratio to the reverse proxy's of the same round.
#
# Flags: -load.rates, -load.duration, -load.rounds, -load.pairs (sequential pairs),
# -load.soak (requests between the fresh and the long-lived measurement),
# -load.soak-rate, -load.profile=DIR (CPU profiles of the service during
# the fresh attacks, taken through its -debug-listen). The generator, the
# mock and the service share the machine: compare ratios within one run,
# not absolutes across machines.
# Not part of scripts/test.sh. Linux only (/proc).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
exec go test -run '^$' -bench '^BenchmarkLoad$' -benchtime 1x -timeout 2h ./internal/loadbench -args "$@"
