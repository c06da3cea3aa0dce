#!/bin/sh
# bench-guardrails.sh: what a CEL input guardrail and a pattern output
# guardrail add to a chat completion through an agent, side by side with
# benchstat: BenchmarkHandler/agent and BenchmarkHandler/agent-guardrails
# (the same agent with the two guardrails), each in a process of its own,
# interleaved and in alternating order so that neither always runs first.
#
#   scripts/bench-guardrails.sh [COUNT] [BENCHTIME]
#
# COUNT rounds (default 10) of BENCHTIME requests each (default 3000x).
# benchstat is looked up on PATH, then in $(go env GOPATH)/bin.
set -eu
cd "$(dirname "$0")/.."
count=${1:-10}
benchtime=${2:-3000x}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/service.test" ./runtime/service
i=0
while [ "$i" -lt "$count" ]; do
	if [ $((i % 2)) -eq 0 ]; then order="agent agent-guardrails"; else order="agent-guardrails agent"; fi
	for b in $order; do
		# Both under one name, so that benchstat sets them side by side.
		(cd runtime/service && "$dir/service.test" -test.run '^$' -test.bench "^BenchmarkHandler/$b\$" \
			-test.benchtime "$benchtime" -test.benchmem) | grep '^Benchmark' | sed "s|^BenchmarkHandler/$b-|BenchmarkHandler/agent-|" >>"$dir/$b.txt"
	done
	i=$((i + 1))
done
benchstat=$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")
"$benchstat" "agent=$dir/agent.txt" "agent-guardrails=$dir/agent-guardrails.txt"
