#!/usr/bin/env bash
# kind-links.sh: what a generated service links. Builds, with the aidgen of a
# checkout, two services — examples/support-desk (fake provider, fixture and
# http tools, memory stores) and an app whose only provider is
# openai-compatible — and prints for each the binary's size, the machine code
# of openai-go and of the fake provider, and its module list (go version -m).
# It exits 1 when support-desk links openai-go or the openai-compatible app
# links the fake provider: a generated service links only the kinds its app
# names (issue 16); or when a service links a feature its app does not use
# (issue 35; internal/cases' TestCasesBuild checks every case): CEL, which
# neither app's rules nor guardrails use; gonum's BLAS kernels, which only
# a memory store uses (support-desk has two, the openai-compatible app
# none), and any other gonum package, which only the eval uses; the
# Snowball stemmer, which only a lexical index or the fake's embeddings use
# (support-desk has both, the openai-compatible app neither).
#
#   scripts/kind-links.sh                  # this checkout, into a temporary directory
#   scripts/kind-links.sh /work/main /tmp/before   # another checkout, for "before" figures
#
# CHECKOUT defaults to the repository this script is in; OUT to a new
# temporary directory, which is kept and printed. The services are built
# offline against the checkout (aidgen build's replace), with the go command
# on PATH.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
checkout=$(cd "${1:-$here}" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

(cd "$checkout" && go build -o "$out/aidgen" ./cmd/aidgen)

# The openai-compatible-only app: one provider, one pinned model, one agent.
mkdir -p "$out/openai-only-src"
cat >"$out/openai-only-src/app.cue" <<'EOF'
name:    "openai-only"
version: "0.1.0"
providers: openai: {
	kind:      "openai-compatible"
	baseURL:   "https://api.openai.com/v1"
	apiKeyEnv: "OPENAI_API_KEY"
}
models: "gpt-4o-mini-2024-07-18": {
	provider:        "openai"
	contextWindow:   128000
	maxOutputTokens: 16384
	cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}
	capabilities: ["tools", "json", "streaming"]
}
aliases: small: "gpt-4o-mini-2024-07-18"
agents: assistant: {model: "small", instructions: "Answer briefly."}
service: entry: "assistant"
EOF

# text BIN PREFIX: bytes of machine code (text symbols) whose name starts
# with PREFIX.
text() {
	go tool nm -size "$1" | awk -v p="$2" '$3 ~ /^[Tt]$/ && index($4, p) == 1 { s += $2 } END { print s + 0 }'
}

status=0
for svc in support-desk openai-only; do
	case $svc in
	support-desk) app=$checkout/examples/support-desk/app.cue ;;
	openai-only) app=$out/openai-only-src/app.cue ;;
	esac
	# aidgen build replaces the runtime by the checkout it runs from.
	(cd "$checkout" && "$out/aidgen" build "$app" -o "$out/$svc" >/dev/null)
	(cd "$out/$svc" && go build -o "$out/$svc.bin" .)
	bin=$out/$svc.bin
	size=$(stat -c %s "$bin")
	all=$(text "$bin" "")
	openai=$(text "$bin" "github.com/openai/openai-go")
	fake=$(text "$bin" "github.com/aidgen/aid/runtime/gateway/fake.")
	cel=$(text "$bin" "cel.dev/cel-go")
	gonum=$(text "$bin" "gonum.org/v1/gonum/")
	blas=$(text "$bin" "gonum.org/v1/gonum/blas")
	snowball=$(text "$bin" "github.com/kljensen/snowball/")
	echo "== $svc ($checkout)"
	echo "binary: $size bytes; machine code: $all bytes, of which openai-go $openai, runtime/gateway/fake $fake, cel-go $cel, gonum $gonum (BLAS $blas), snowball $snowball"
	echo "modules:"
	go version -m "$bin" | awk '$1 == "dep" { print "  " $2 " " $3 }'
	case $svc in
	support-desk) if [ "$openai" -ne 0 ]; then echo "FAIL: support-desk links openai-go"; status=1; fi ;;
	openai-only) if [ "$fake" -ne 0 ]; then echo "FAIL: the openai-compatible-only app links the fake provider"; status=1; fi ;;
	esac
	if [ "$cel" -ne 0 ]; then echo "FAIL: $svc links CEL, and its app has no condition"; status=1; fi
	# What gonum links beyond the BLAS kernels (its internal assembly
	# included) is the eval's statistics, which no service runs.
	if [ $((gonum - blas - $(text "$bin" "gonum.org/v1/gonum/internal/"))) -ne 0 ]; then
		echo "FAIL: $svc links gonum beyond its BLAS kernels, and a service runs no eval"; status=1
	fi
	case $svc in
	support-desk)
		if [ "$blas" -eq 0 ]; then echo "FAIL: support-desk links no BLAS kernels, and its memory store searches with them"; status=1; fi
		if [ "$snowball" -eq 0 ]; then echo "FAIL: support-desk links no stemmer, and its lexical index and fake embeddings stem"; status=1; fi
		;;
	openai-only)
		if [ "$gonum" -ne 0 ]; then echo "FAIL: the openai-compatible-only app links gonum, and it has no memory store"; status=1; fi
		if [ "$snowball" -ne 0 ]; then echo "FAIL: the openai-compatible-only app links the Snowball stemmer, and it has no lexical index nor fake embeddings"; status=1; fi
		;;
	esac
done
echo "output in $out"
exit $status
