#!/usr/bin/env bash
# Measures a distributed eval (aidgen eval --queue with aidgen worker
# processes) against itself with one and with three workers: 2,000 samples
# (200 cases x 10 runs) answered by the keyless fake provider with 50 ms of
# latency per call, each worker running --concurrency samples at once.
#
#   AID_BENCH_DSN=postgres://... bash scripts/bench-eval-queue.sh [CONCURRENCY]
#
# AID_BENCH_DSN (else AID_TEST_DATABASE_URL) names a PostgreSQL server and a
# database to connect to; the script creates a database of its own beside
# it with psql for River's tables, the results and the ledger, and drops it
# at the end. It prints, per worker count, the wall time, the samples per second
# and the job overhead per sample: wall time x workers x concurrency /
# samples - 50 ms, the time a worker slot spent on a sample beyond the
# model's latency (queueing, fetching, storing the result, completing the
# job, and the budget ledger's writes in PostgreSQL), beside the same eval
# run in one process without the queue.
set -euo pipefail
dsn="${AID_BENCH_DSN:-${AID_TEST_DATABASE_URL:-}}"
if [[ -z "$dsn" ]]; then
	echo "set AID_BENCH_DSN to a PostgreSQL database" >&2
	exit 2
fi
conc="${1:-8}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
db="aid_bench_$$"
admin="$dsn"
dsn="$(printf '%s' "$dsn" | sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$db#")"
psql -q "$admin" -c "CREATE DATABASE $db"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	psql -q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/aidgen" ./cmd/aidgen)

# 200 cases; the fake answers from this answer key with accuracy 0.6.
{
	printf '{"name": "bench", "version": "1", "cases": ['
	for i in $(seq 1 200); do
		[[ $i -gt 1 ]] && printf ','
		printf '{"id": "c%03d", "input": "question %d", "expected": "answer %d"}' "$i" "$i" "$i"
	done
	printf ']}\n'
} >"$work/bench.json"
cat >"$work/app.cue" <<CUE
name:    "bench"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0, latency: "50ms", answerKey: {dataset: "bench.json", accuracy: 0.6}}
models: "fake-chat-2024-06-01": {
	provider: "fake", contextWindow: 8192, maxOutputTokens: 64
	cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}
	capabilities: ["json", "streaming", "tools"]
}
aliases: small: "fake-chat-2024-06-01"
evals: bench: {
	dataset: "bench.json"
	target: {model: "small", prompt: "{{.Input}}"}
	runs: 10
	concurrency: $conc
	metrics: ["exact_match"]
}
CUE

run() {
	local n="$1"
	pids=()
	for i in $(seq 1 "$n"); do
		"$work/aidgen" worker "$work/app.cue" --queue "$dsn" --concurrency "$conc" 2>"$work/worker-$n-$i.log" &
		pids+=($!)
	done
	# Workers are ready once they print their first line.
	for i in $(seq 1 "$n"); do
		until grep -q "worker:" "$work/worker-$n-$i.log"; do sleep 0.1; done
	done
	local start end
	start=$(date +%s.%N)
	"$work/aidgen" eval "$work/app.cue" --queue "$dsn" --progress none >"$work/eval-$n.out"
	end=$(date +%s.%N)
	for p in "${pids[@]}"; do kill -TERM "$p"; done
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
	awk -v s="$start" -v e="$end" -v n="$n" -v c="$conc" 'BEGIN {
		wall = e - s
		printf "%d worker(s) x %d: %.2f s, %.0f samples/s, job overhead %.1f ms per sample\n", n, c, wall, 2000 / wall, (wall * n * c / 2000 - 0.050) * 1000
	}'
	grep -h "stopped after" "$work"/worker-"$n"-*.log | sed 's/^/  /'
	echo "$end $start" >"$work/time-$n"
}

# The same eval in one process without the queue, at the same concurrency:
# what a sample costs beyond the model's latency without jobs.
start=$(date +%s.%N)
"$work/aidgen" eval "$work/app.cue" --progress none >"$work/eval-local.out"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v c="$conc" 'BEGIN {
	wall = e - s
	printf "one process, no queue, concurrency %d: %.2f s, %.0f samples/s, overhead %.1f ms per sample\n", c, wall, 2000 / wall, (wall * c / 2000 - 0.050) * 1000
}'

run 1
run 3
awk '{ w[NR] = $1 - $2 } END { printf "speed-up with 3 workers: %.2fx\n", w[1] / w[2] }' "$work/time-1" "$work/time-3"
