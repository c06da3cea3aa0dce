#!/usr/bin/env bash
# test.sh — the one command that checks aid: formatting, vet, staticcheck, the licences of the
# dependencies, and every test with -race against a real PostgreSQL with pgvector.
#
#   bash scripts/test.sh                    # gofmt, go vet, staticcheck, licences, go test -race -count=1 ./...
#   bash scripts/test.sh -run X ./ir/       # extra arguments go to `go test`
#
# When arguments name no package (nothing starting with "."), ./... is added, so
# `bash scripts/test.sh -run X` still tests the whole module.
#
# Run as root, it installs Debian's chromium (the HTML report's test renders in it headless)
# when /usr/bin/chromium is missing, and Debian's bubblewrap (the sandbox tool kind's tests)
# when bwrap is missing. Unless AID_TEST_DATABASE_URL is already set, it installs
# PostgreSQL 15 + pgvector (only when run as root; otherwise they must already be installed),
# starts a throwaway cluster with scripts/postgres.sh, and stops it on exit, also after a
# failure or an interrupt.
# It leaves CI as it finds it: with CI set, a test that needs the database fails instead of
# skipping when it has none.
#
# staticcheck is pinned to STATICCHECK_VERSION below and installed with `go install` into
# AID_TOOLS_BIN (default ~/.cache/aid/bin, so a staticcheck of another version on PATH is left
# alone) when the binary there is missing, of another version, or built by another Go release
# (a staticcheck built by an older Go cannot load code for a newer one). It is pinned here rather
# than with a `tool` directive in go.mod because that would add honnef.co/go/tools and its
# requirements to the module graph of everyone who imports the runtime, and it would raise
# golang.org/x/net for the runtime itself (v0.60.0 to v0.61.0 when tried).
#
# The licence check (internal/tools/licenses) prints every module of the dependency graph, tests'
# included, for linux, darwin and windows, with the licence github.com/google/licensecheck finds
# in its licence files, and fails on a missing, unrecognised or non-permissive licence unless
# scripts/licenses-allow.txt holds a reviewed exception for the module. It reads only the module
# cache (GOPROXY=off): after `go mod download`, which this script runs first, it needs no network.
set -euo pipefail

STATICCHECK_VERSION=v0.8.2

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# now prints the time in milliseconds; since prints the seconds elapsed since such a time.
now() { local t=${EPOCHREALTIME/[.,]/}; printf '%s\n' "${t%???}"; }
since() {
	local ms=$(($(now) - $1))
	printf '%d.%01ds' $((ms / 1000)) $((ms % 1000 / 100))
}
T0=$(now)
phase() {
	PHASE_NAME=$1
	PHASE_START=$(now)
	printf '==> %s\n' "$PHASE_NAME" >&2
}
done_phase() { printf '    %s: %s\n' "$PHASE_NAME" "$(since "$PHASE_START")" >&2; }

phase "gofmt -l ."
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	printf 'these files are not gofmt-formatted (run gofmt -w on them):\n%s\n' "$unformatted" >&2
	exit 1
fi
done_phase

phase "go vet ./..."
go vet ./...
done_phase

# staticcheck_current reports whether the binary $1 is staticcheck $STATICCHECK_VERSION built by
# the Go release in use.
staticcheck_current() {
	local info
	info=$(go version -m "$1" 2>/dev/null) || return 1
	[[ "$(head -n1 <<<"$info")" == *": $(go env GOVERSION)" ]] &&
		grep -q $'^\tmod\thonnef.co/go/tools\t'"$STATICCHECK_VERSION"$'\t' <<<"$info"
}
tools_bin=${AID_TOOLS_BIN:-${XDG_CACHE_HOME:-${HOME:?HOME or AID_TOOLS_BIN must be set}/.cache}/aid/bin}
staticcheck=$tools_bin/staticcheck
if ! staticcheck_current "$staticcheck"; then
	phase "go install honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	mkdir -p "$tools_bin"
	GOBIN=$tools_bin go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	staticcheck_current "$staticcheck" || {
		printf 'go install left no staticcheck %s at %s\n' "$STATICCHECK_VERSION" "$staticcheck" >&2
		exit 1
	}
	done_phase
fi

phase "staticcheck ./... ($STATICCHECK_VERSION)"
"$staticcheck" ./...
done_phase

phase "licences (go run ./internal/tools/licenses)"
# The check lists the graph for other operating systems too, whose modules (cobra's mousetrap on
# windows) a build here never fetched; go mod download fetches what is missing and is a no-op,
# without network, when the module cache already holds go.mod's modules.
go mod download
GOPROXY=off go run ./internal/tools/licenses -allow scripts/licenses-allow.txt
done_phase

# The HTML report's test renders real reports in Debian's headless Chromium; it skips without
# /usr/bin/chromium, unless CI is set, when it fails. As root (CI), install it like PostgreSQL.
if [[ $EUID -eq 0 && ! -x /usr/bin/chromium ]] && command -v apt-get >/dev/null; then
	phase "apt-get install chromium"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
	done_phase
fi

# The sandbox tool kind's tests (runtime/agents/tools/sandbox: its attack tests, and the
# data-analysis example) run commands through bubblewrap; they skip without bwrap, unless CI
# is set, when they fail. As root (CI), install Debian's bubblewrap like chromium.
if [[ $EUID -eq 0 ]] && ! command -v bwrap >/dev/null && command -v apt-get >/dev/null; then
	phase "apt-get install bubblewrap"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >&2
	done_phase
fi

# The MCP end-to-end tests (internal/e2e/mcp) drive the official npm servers and client, and
# internal/e2e the official OpenAI Node client (internal/e2e/openai), which the tests install
# with npm ci; they need Node.js, from Debian when it is missing.
if ! command -v node >/dev/null && [[ $EUID -eq 0 ]]; then
	phase "apt-get install nodejs npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
	done_phase
fi

if [[ -z "${AID_TEST_DATABASE_URL:-}" ]]; then
	if [[ $EUID -eq 0 ]]; then
		phase "postgres.sh install"
		bash scripts/postgres.sh install
		done_phase
	fi

	phase "postgres.sh start"
	# A state file of our own, so concurrent runs on one machine do not stop each other's server.
	AID_PG_STATE=$(mktemp -u "${TMPDIR:-/tmp}/aid-test-pg.XXXXXX.state")
	export AID_PG_STATE
	stop_postgres() {
		local t
		t=$(now)
		bash scripts/postgres.sh stop || true
		printf '    postgres.sh stop: %s\n' "$(since "$t")" >&2
	}
	trap stop_postgres EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	AID_TEST_DATABASE_URL=$(bash scripts/postgres.sh start)
	export AID_TEST_DATABASE_URL
	done_phase
fi

# An argument names packages when it is a relative path or a module path and is not the value
# of a preceding flag (as the "." in `-run .` is).
args=("$@")
has_pkg=0 prev=""
for a in "${args[@]}"; do
	if [[ "$a" == . || "$a" == ./* || "$a" == ../* || "$a" == github.com/aidgen/aid* ]]; then
		case "$prev" in
		-*=* | -v | -race | -short | -failfast | -json | -cover | -benchmem | -x | -n | -a) has_pkg=1 ;;
		-*) ;; # the value of a flag such as -run or -bench
		*) has_pkg=1 ;;
		esac
	fi
	prev=$a
done
((has_pkg)) || args+=(./...)

phase "go test -race -count=1 ${args[*]}"
go test -race -count=1 "${args[@]}"
done_phase

printf '==> all checks passed in %s\n' "$(since "$T0")" >&2
