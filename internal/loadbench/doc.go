// Package loadbench is the load benchmark of a generated service, run from
// outside as a user would measure it: scripts/load.sh (or go test -run '^$'
// -bench . ./internal/loadbench) builds a small application with aidgen
// build and go build, starts the binary and a zero-latency OpenAI-compatible
// mock upstream as processes of their own, and drives them with vegeta on
// loopback. Two floors stand beside the service, each the test binary as a
// process of its own in front of the same mock: "proxy", the standard
// library's httputil.ReverseProxy, which copies bytes, and "jsonproxy",
// which also decodes and encodes the request and the answer with
// encoding/json, the least a proxy that reads requests does. It reports,
// for the floors, a chat completion through an agent without tools and one
// on a directly exposed alias:
//
//   - the added latency of sequential requests: each request is sent to the
//     mock, then through the service, and the difference of the pair is
//     taken, so that drift of the machine cancels; p50 and p99;
//   - at each fixed rate, vegeta's success ratio, errors and latency
//     p50/p99, beside the same attack on the mock alone;
//   - the service's CPU per request at each rate, from the utime and stime
//     of /proc/PID/stat, beside the mock's;
//   - each rate in -load.rounds rounds (3 by default), the mock alone and
//     then every target in an order that rotates from round to round, so
//     that a busy second of the machine lands on each in turn; the summary
//     is the median of the rounds (with each round's p99), and a target's
//     CPU also as the median of its ratios to the reverse proxy's of the
//     same round;
//
// first in a fresh process, then (the service alone) again after it has served
// -load.soak requests (200,000 by default), with its resident set before
// and after.
//
// The load generator, the mock and the service share the machine, so the
// figures are ratios measured in one run, not absolutes to compare across
// machines. The benchmark is not part of scripts/test.sh: it runs only
// with -bench.
package loadbench
