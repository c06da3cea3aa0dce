#!/usr/bin/env bash
# demo.sh — the README's main job in one command: build examples/support-desk
# with aidgen, compile the generated service, run it on the embedded default
# (fake provider, in-memory state, no keys), ask it one question through
# /v1/chat/completions, print the answer, and stop it.
#
#   bash scripts/demo.sh                         # asks tech "I cannot log in": a completed answer
#   bash scripts/demo.sh "" "I want a refund for order AB-123456"  # triage: hands off, pauses for approval
#   (arguments: AGENT MESSAGE; an empty AGENT is the entry agent, triage)
#
# It needs only Go: the client is internal/tools/democlient (openai-go), and
# everything builds from the module cache. The service and its build live in
# a temporary directory that is removed on exit, also after a failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
agent="${1-tech}"
message="${2:-I cannot log in}"
work="$(mktemp -d)"
pid=""
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
echo "+ aidgen build examples/support-desk/app.cue -o $work/support-desk" >&2
go run ./cmd/aidgen build examples/support-desk/app.cue -o "$work/support-desk" >/dev/null
echo "+ go build (generated service, and the demo client)" >&2
(cd "$work/support-desk" && GOWORK=off GOFLAGS=-mod=readonly go build -o "$work/bin/support-desk" .)
go build -o "$work/bin/democlient" ./internal/tools/democlient

# A free loopback port: the kernel picks one, the service gets it by flag.
port="$("$work/bin/democlient" -free-port)"
echo "+ support-desk -listen 127.0.0.1:$port" >&2
(cd "$work/support-desk" && exec "$work/bin/support-desk" -listen "127.0.0.1:$port" 2>"$work/service.log") &
pid=$!

echo "+ POST /v1/chat/completions ${agent:+(model $agent) }\"$message\"" >&2
if ! "$work/bin/democlient" -base "http://127.0.0.1:$port" -model "$agent" -message "$message"; then
	echo "--- service log:" >&2
	cat "$work/service.log" >&2
	exit 1
fi
