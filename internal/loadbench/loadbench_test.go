package loadbench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/aidgen/aid/internal/cli"
)

var (
	rates    = flag.String("load.rates", "500,1000,2000", "comma-separated request rates (per second) of the fixed-rate attacks")
	duration = flag.Duration("load.duration", 10*time.Second, "duration of each fixed-rate attack")
	pairs    = flag.Int("load.pairs", 2000, "sequential request pairs (mock, then service) for the added latency")
	rounds   = flag.Int("load.rounds", 3, "rounds of the fixed-rate attacks at each rate, the targets taking turns in a rotating order; the summary is the median of the rounds")
	soak     = flag.Int("load.soak", 200_000, "requests served between the fresh and the long-lived measurements")
	soakRate = flag.Int("load.soak-rate", 2000, "request rate of the soak")
	profile  = flag.String("load.profile", "", "directory to write the service's CPU profiles to, one per fresh fixed-rate attack (agent-RATE.pprof, alias-RATE.pprof), taken through its -debug-listen")
)

// roleEnv makes the test binary one of the benchmark's servers instead of
// the benchmark: "mock", the upstream; "proxy" and "jsonproxy", the floors
// (see serveFloor), which forward to the upstream at upstreamEnv.
const (
	roleEnv     = "AID_LOADBENCH_ROLE"
	upstreamEnv = "AID_LOADBENCH_UPSTREAM"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "mock":
		os.Exit(serve(mockHandler()))
	case "proxy", "jsonproxy":
		os.Exit(serve(floorHandler(os.Getenv(roleEnv), os.Getenv(upstreamEnv))))
	}
	os.Exit(m.Run())
}

// mockCompletion is the mock's answer to every non-streaming request.
const mockCompletion = `{"id":"chatcmpl-mock","object":"chat.completion","created":1700000000,"model":"mock-chat-2024-01-01",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris","refusal":null},"finish_reason":"stop","logprobs":null}],` +
	`"usage":{"prompt_tokens":24,"completion_tokens":1,"total_tokens":25}}`

// mockStream is the mock's answer to every streaming request.
const mockStream = `data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-chat-2024-01-01","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-chat-2024-01-01","choices":[{"index":0,"delta":{"content":"Paris"},"finish_reason":null}]}

data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-chat-2024-01-01","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-chat-2024-01-01","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":1,"total_tokens":25}}

data: [DONE]

`

// mockHandler is a zero-latency OpenAI-compatible chat-completions
// endpoint.
func mockHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, mockStream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, mockCompletion)
	})
}

// floorHandler is a floor the service is measured against: the least a
// Go proxy in front of the upstream does, with the standard library's
// server and client on the same connections and machine. "proxy" is
// httputil.ReverseProxy, which copies bytes; "jsonproxy" also does what
// any proxy that reads the request must: it decodes the chat request,
// checks its model, encodes it for the upstream, and decodes and encodes
// the answer, with encoding/json.
func floorHandler(role, upstream string) http.Handler {
	target, err := url.Parse("http://" + upstream)
	if err != nil {
		panic(err)
	}
	transport := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	if role == "proxy" {
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = transport
		return rp
	}
	client := &http.Client{Transport: transport}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req["model"] == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		req["model"] = "mock-chat-2024-01-01"
		body, _ := json.Marshal(req)
		up, err := client.Post(target.String()+r.URL.Path, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, "upstream", http.StatusBadGateway)
			return
		}
		defer up.Body.Close()
		var answer map[string]any
		if err := json.NewDecoder(up.Body).Decode(&answer); err != nil {
			http.Error(w, "upstream", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	})
}

// serve serves h on a free loopback port, prints its address and serves
// until its standard input closes (the benchmark ending, however it ends).
func serve(h http.Handler) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: h}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// appFile is the benchmark's application: one agent without tools and one
// exposed alias on the mock, a global budget both charge, bearer auth.
const appFile = `name:    "loadbench"
version: "0.1.0"
providers: mock: {kind: "openai-compatible", baseURL: "http://@MOCK@/v1", apiKeyEnv: "LOADBENCH_UPSTREAM_KEY", maxRetries: 0}
models: "mock-chat-2024-01-01": {
	provider: "mock", contextWindow: 128000, maxOutputTokens: 256
	cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}
	capabilities: ["streaming"]
}
aliases: fast: "mock-chat-2024-01-01"
budgets: org: {maxUSD: 1000000, scope: "global"}
agents: bench: {model: "fast", instructions: "Answer with the city only.", budget: "org"}
service: {
	listen: "127.0.0.1:0"
	entry:  "bench"
	auth: {kind: "bearer", tokenEnv: "LOADBENCH_TOKEN"}
	expose: {aliases: ["fast"], budget: "org"}
}
`

const token = "tok-loadbench"

// bodies are the requests sent: the same conversation to the mock, to the
// agent and to the alias.
var bodies = map[string]string{
	"mock":      `{"model":"mock-chat-2024-01-01","messages":[{"role":"system","content":"Answer with the city only."},{"role":"user","content":"What is the capital of France?"}]}`,
	"agent":     `{"model":"bench","messages":[{"role":"user","content":"What is the capital of France?"}]}`,
	"proxy":     `{"model":"mock-chat-2024-01-01","messages":[{"role":"system","content":"Answer with the city only."},{"role":"user","content":"What is the capital of France?"}]}`,
	"jsonproxy": `{"model":"fast","messages":[{"role":"system","content":"Answer with the city only."},{"role":"user","content":"What is the capital of France?"}]}`,
	"alias":     `{"model":"fast","messages":[{"role":"system","content":"Answer with the city only."},{"role":"user","content":"What is the capital of France?"}]}`,
}

// process is a child process whose CPU time and memory are read from /proc.
type process struct {
	cmd   *exec.Cmd
	name  string
	debug string // the service's -debug-listen address
}

// cpu returns the process's user and system CPU time so far.
func (p *process) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const userHZ = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return time.Duration(utime+stime) * time.Second / userHZ
}

// rssMiB returns the process's resident set.
func (p *process) rssMiB(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

// BenchmarkLoad runs the whole load benchmark once (-benchtime 1x); see
// the package documentation, and scripts/load.sh.
func BenchmarkLoad(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("reads CPU time from /proc")
	}
	for b.Loop() {
		runLoad(b)
	}
}

func runLoad(b *testing.B) {
	work := b.TempDir()
	mock, mockAddr := startRole(b, "mock", "")
	proxy, proxyAddr := startRole(b, "proxy", mockAddr)
	jsonProxy, jsonProxyAddr := startRole(b, "jsonproxy", mockAddr)
	bin := buildService(b, work, mockAddr)
	svc, base := startService(b, bin)
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	urls := map[string]string{
		"mock":  "http://" + mockAddr + "/v1/chat/completions",
		"proxy": "http://" + proxyAddr + "/v1/chat/completions", "jsonproxy": "http://" + jsonProxyAddr + "/v1/chat/completions",
		"agent": base + "/v1/chat/completions", "alias": base + "/v1/chat/completions",
	}
	for _, k := range []string{"mock", "proxy", "jsonproxy", "agent", "alias"} {
		for range 200 { // warm up connections and caches
			post(b, client, urls[k], bodies[k], k == "agent" || k == "alias")
		}
	}
	var rateList []int
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || r <= 0 {
			b.Fatalf("-load.rates: %q is not a rate", s)
		}
		rateList = append(rateList, r)
	}
	if *rounds < 1 {
		b.Fatalf("-load.rounds=%d: want at least one round", *rounds)
	}
	floors := map[string]*process{"proxy": proxy, "jsonproxy": jsonProxy}
	report := func(phase string) {
		logf(b, "== %s service (RSS %.1f MiB)", phase, svc.rssMiB(b))
		for _, k := range []string{"proxy", "jsonproxy", "agent", "alias"} {
			if phase != "fresh" && floors[k] != nil {
				continue // the floors have served no soak
			}
			p50, p99 := addedSequential(b, client, urls["mock"], urls[k], k)
			logf(b, "%-5s sequential added latency: p50 %6.1f µs  p99 %6.1f µs  (%d pairs)", k, p50, p99, *pairs)
			b.ReportMetric(p50, phase+"-"+k+"-seq-added-p50-µs")
		}
		targets := []string{"proxy", "jsonproxy", "agent", "alias"}
		if phase != "fresh" {
			targets = []string{"agent", "alias"} // the floors have served no soak
		}
		for _, rate := range rateList {
			// The machine is shared: one attack can land on a quiet second
			// and the next on a busy one. Each round measures the mock
			// alone and then every target, in an order that rotates from
			// round to round, and the summary is the median of the rounds,
			// the CPU of a target also as a ratio to the floor of its own
			// round.
			runs := map[string][]attackResult{}
			var bases []attackResult
			for round := range *rounds {
				base := attack(b, urls["mock"], bodies["mock"], false, rate, mock, nil)
				bases = append(bases, base)
				logf(b, "%5d/s round %d mock : %s", rate, round+1, base)
				for i := range targets {
					k := targets[(i+round)%len(targets)]
					proc := svc
					if floors[k] != nil {
						proc = floors[k]
					}
					var profiled func()
					if *profile != "" && round == 0 && phase == "fresh" && floors[k] == nil {
						profiled = profileDuring(b, svc, filepath.Join(*profile, fmt.Sprintf("%s-%d.pprof", k, rate)))
					}
					m := attack(b, urls[k], bodies[k], floors[k] == nil, rate, proc, mock)
					if profiled != nil {
						profiled()
					}
					m.added50, m.added99 = float64(m.p50-base.p50)/1e3, float64(m.p99-base.p99)/1e3
					runs[k] = append(runs[k], m)
					logf(b, "%5d/s round %d %-5s: %s  added p50 %6.1f µs p99 %6.1f µs", rate, round+1, k, m, m.added50, m.added99)
				}
			}
			logf(b, "%5d/s median of %d rounds:", rate, *rounds)
			logf(b, "        mock     : CPU %6.1f µs/req, p50 %6.3f ms p99 %6.3f ms", median(bases, func(r attackResult) float64 { return r.cpuPerReq }),
				median(bases, func(r attackResult) float64 { return float64(r.p50) / 1e6 }), median(bases, func(r attackResult) float64 { return float64(r.p99) / 1e6 }))
			for _, k := range targets {
				rs := runs[k]
				cpu := median(rs, func(r attackResult) float64 { return r.cpuPerReq })
				p99 := median(rs, func(r attackResult) float64 { return float64(r.p99) / 1e6 })
				errs := 0
				for _, r := range rs {
					errs += r.errors
				}
				line := fmt.Sprintf("        %-9s: CPU %6.1f µs/req, p50 %6.3f ms p99 %6.3f ms (rounds %s ms), added p50 %6.1f µs, %d errors",
					k, cpu, median(rs, func(r attackResult) float64 { return float64(r.p50) / 1e6 }), p99, spread(rs), median(rs, func(r attackResult) float64 { return r.added50 }), errs)
				if floor := runs["proxy"]; len(floor) == len(rs) && k != "proxy" {
					ratios := make([]float64, len(rs))
					for i := range rs {
						ratios[i] = rs[i].cpuPerReq / floor[i].cpuPerReq
					}
					slices.Sort(ratios)
					line += fmt.Sprintf(", CPU %.2f× the proxy's", quantile(ratios, 0.5))
				}
				logf(b, "%s", line)
				b.ReportMetric(cpu, fmt.Sprintf("%s-%s-%d-cpu-µs/req", phase, k, rate))
				b.ReportMetric(float64(errs), fmt.Sprintf("%s-%s-%d-errors", phase, k, rate))
				b.ReportMetric(p99, fmt.Sprintf("%s-%s-%d-p99-ms", phase, k, rate))
			}
		}
	}
	report("fresh")
	rssBefore := svc.rssMiB(b)
	start := time.Now()
	soakFor(b, urls["agent"])
	rssAfter := svc.rssMiB(b)
	logf(b, "== soak: %d requests (agent and alias alternating) at %d/s in %v; service RSS %.1f -> %.1f MiB",
		*soak, *soakRate, time.Since(start).Round(time.Second), rssBefore, rssAfter)
	b.ReportMetric(rssAfter, "soaked-rss-MiB")
	report("soaked")
}

func logf(b *testing.B, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	b.Logf(format, args...)
}

// startRole runs the test binary as one of the benchmark's servers (role,
// with the upstream it forwards to, if any).
func startRole(b *testing.B, role, upstream string) (*process, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, upstreamEnv+"="+upstream)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("%s: %v", role, err)
	}
	return &process{cmd: cmd, name: role}, strings.TrimSpace(addr)
}

// buildService generates the benchmark's service with the real CLI and
// compiles it as a user would.
func buildService(b *testing.B, work, mockAddr string) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	appDir := filepath.Join(work, "app")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		b.Fatal(err)
	}
	app := filepath.Join(appDir, "app.cue")
	if err := os.WriteFile(app, []byte(strings.ReplaceAll(appFile, "@MOCK@", mockAddr)), 0o644); err != nil {
		b.Fatal(err)
	}
	svcDir := filepath.Join(work, "service")
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"build", app, "-o", svcDir, "--runtime", root}, strings.NewReader(""), &out, &errOut); code != 0 {
		b.Fatalf("aidgen build exited %d:\n%s%s", code, out.String(), errOut.String())
	}
	bin := filepath.Join(work, "loadbench-service")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = svcDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startService runs the built service on a free loopback port, its log
// drained as a log shipper would, and returns its base URL.
func startService(b *testing.B, bin string) (*process, string) {
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-debug-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "LOADBENCH_TOKEN="+token, "LOADBENCH_UPSTREAM_KEY=sk-loadbench")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	var debug string
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Msg {
		case "debug listener":
			debug = line.Addr
		case "serving":
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return &process{cmd: cmd, name: "service", debug: debug}, "http://" + line.Addr
		}
	}
	b.Fatalf("the service stopped before serving: %v", sc.Err())
	return nil, ""
}

// post sends one request and checks its answer.
func post(b *testing.B, c *http.Client, url, body string, auth bool) time.Duration {
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"Paris"`)) {
		b.Fatalf("%s: %d %s %v", url, resp.StatusCode, out, err)
	}
	return d
}

// addedSequential sends -load.pairs pairs, the mock then the service, one
// request at a time, and returns the p50 and p99 of the differences, in
// microseconds.
func addedSequential(b *testing.B, c *http.Client, mockURL, url, kind string) (p50, p99 float64) {
	diffs := make([]float64, *pairs)
	for i := range diffs {
		direct := post(b, c, mockURL, bodies["mock"], false)
		through := post(b, c, url, bodies[kind], true)
		diffs[i] = float64(through-direct) / float64(time.Microsecond)
	}
	slices.Sort(diffs)
	return quantile(diffs, 0.5), quantile(diffs, 0.99)
}

func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// attackResult is one fixed-rate attack.
type attackResult struct {
	rate      float64
	requests  uint64
	errors    int
	p50, p99  time.Duration
	cpuPerReq float64 // µs of the measured process per request
	mockCPU   float64 // µs of the mock per request, when behind the service
	errText   []string
	// added50 and added99 are p50 and p99 less the mock's alone, in µs.
	added50, added99 float64
}

// median returns the median of f over rs (the lower middle of an even
// number).
func median(rs []attackResult, f func(attackResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return quantile(v, 0.5)
}

// spread lists the rounds' p99s, in milliseconds.
func spread(rs []attackResult) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.FormatFloat(float64(r.p99)/1e6, 'f', 1, 64)
	}
	return strings.Join(parts, "/")
}

func (r attackResult) String() string {
	s := fmt.Sprintf("%6d requests, %d errors, p50 %6.3f ms p99 %6.3f ms, CPU %6.1f µs/req", r.requests, r.errors,
		float64(r.p50)/1e6, float64(r.p99)/1e6, r.cpuPerReq)
	if r.mockCPU > 0 {
		s += fmt.Sprintf(" (mock %5.1f)", r.mockCPU)
	}
	if len(r.errText) > 0 {
		s += fmt.Sprintf(" %q", r.errText)
	}
	return s
}

// attack sends body to url at rate for -load.duration with vegeta and
// measures proc's CPU (and the mock's, when it is behind the service).
func attack(b *testing.B, url, body string, auth bool, rate int, proc, mock *process) attackResult {
	hdr := http.Header{"Content-Type": {"application/json"}}
	if auth {
		hdr.Set("Authorization", "Bearer "+token)
	}
	tg := vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: url, Body: []byte(body), Header: hdr})
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(256), vegeta.Workers(32), vegeta.MaxWorkers(512), vegeta.Timeout(10*time.Second))
	cpu0 := proc.cpu(b)
	var mock0 time.Duration
	if mock != nil {
		mock0 = mock.cpu(b)
	}
	var m vegeta.Metrics
	for res := range atk.Attack(tg, vegeta.Rate{Freq: rate, Per: time.Second}, *duration, "load") {
		if res.Code == 200 && !bytes.Contains(res.Body, []byte(`"Paris"`)) {
			res.Code, res.Error = 0, "answer without the mock's text"
		}
		m.Add(res)
	}
	m.Close()
	out := attackResult{rate: m.Rate, requests: m.Requests, p50: m.Latencies.P50, p99: m.Latencies.P99, errText: m.Errors}
	out.errors = int(math.Round(float64(m.Requests) * (1 - m.Success)))
	if m.Requests > 0 {
		out.cpuPerReq = float64(proc.cpu(b)-cpu0) / float64(m.Requests) / 1e3
		if mock != nil {
			out.mockCPU = float64(mock.cpu(b)-mock0) / float64(m.Requests) / 1e3
		}
	}
	return out
}

// profileDuring starts a CPU profile of the service over the next
// -load.duration (less a second, so that it ends within the attack) and
// returns the function that waits for it and writes it to file.
func profileDuring(b *testing.B, svc *process, file string) func() {
	secs := max(int((*duration-time.Second)/time.Second), 1)
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", svc.debug, secs))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("profile: %s", resp.Status)
			return
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			done <- err
			return
		}
		f, err := os.Create(file)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() {
		if err := <-done; err != nil {
			b.Fatalf("profiling the service: %v", err)
		}
		logf(b, "   CPU profile: go tool pprof -top %s", file)
	}
}

// soakFor serves -load.soak requests, agent and alias alternating, at
// -load.soak-rate.
func soakFor(b *testing.B, url string) {
	hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}}
	tg := vegeta.NewStaticTargeter(
		vegeta.Target{Method: "POST", URL: url, Body: []byte(bodies["agent"]), Header: hdr},
		vegeta.Target{Method: "POST", URL: url, Body: []byte(bodies["alias"]), Header: hdr},
	)
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(256), vegeta.Workers(32), vegeta.MaxWorkers(512), vegeta.Timeout(10*time.Second))
	d := time.Duration(float64(*soak) / float64(*soakRate) * float64(time.Second))
	var m vegeta.Metrics
	for res := range atk.Attack(tg, vegeta.Rate{Freq: *soakRate, Per: time.Second}, d, "soak") {
		m.Add(res)
	}
	m.Close()
	if m.Success < 1 {
		logf(b, "soak: %d requests, success %.4f, errors %q", m.Requests, m.Success, m.Errors)
	}
}
