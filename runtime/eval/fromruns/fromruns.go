// Package fromruns samples an eval dataset from recorded runs: the event
// logs aidgen run --record writes and a service exports (runtime/agents
// Record). Each sampled run becomes a case whose input is the run's input,
// whose expected answer is the run's answer, and whose tool answers are the
// calls the run made (eval.Case.Tools), which a tool in replay mode answers
// with. The CI pattern it serves: today's application replayed on last
// week's traffic, gated against last week's answers.
//
// Redaction comes first: every declared pattern is replaced in the input,
// the answer and every tool argument and result before a case exists, so
// nothing a pattern matches reaches a dataset, a report or a baseline. It
// is not for the runtime's own agent loop, which records runs; it only
// reads what was recorded.
package fromruns

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/internal/jsoncanon"
)

// Redacted is what a redaction pattern's match is replaced with.
const Redacted = "[redacted]"

// Options selects and cleans the runs a dataset is sampled from.
type Options struct {
	// Agent keeps the runs that started on this agent; empty keeps all.
	Agent string
	// Statuses keeps the runs that ended with one of these statuses; empty
	// keeps completed runs, the only ones with an answer to expect.
	Statuses []agents.Status
	// Since and Until keep the runs last written in [Since, Until); a zero
	// bound is open. A run whose log has no time is dropped by either.
	Since, Until time.Time
	// Sample, when above zero, keeps at most this many runs, drawn without
	// replacement with Seed, in the order of their ids, so the same logs
	// and seed give the same dataset.
	Sample int
	// Seed draws the sample.
	Seed uint64
	// Redact are the patterns replaced with Redacted in every text a case
	// holds, before the case exists.
	Redact []*regexp.Regexp
}

// Read reads event logs from r: one or more runs, each starting with its
// "run" line, one after the other (several aidgen run --record files
// concatenated). name is the file name messages carry.
func Read(name string, r io.Reader) ([]*agents.Recording, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []*agents.Recording
	var cur bytes.Buffer
	start, n := 0, 0
	flush := func() error {
		if cur.Len() == 0 {
			return nil
		}
		rec, err := agents.ReadRecording(&cur)
		if err != nil {
			return fmt.Errorf("%s: the run starting at line %d: %w", name, start, err)
		}
		out = append(out, rec)
		cur.Reset()
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var kind struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &kind) == nil && kind.Type == "run" {
			if err := flush(); err != nil {
				return nil, err
			}
			start = n
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no recorded run", name)
	}
	return out, nil
}

// Dataset samples the recordings into a dataset named name: the runs that
// pass the filters, sampled, each a case (see the package documentation),
// redacted. It fails when no run passes, saying how many each filter
// dropped.
func Dataset(name string, recs []*agents.Recording, opts Options) (*eval.Dataset, error) {
	statuses := opts.Statuses
	if len(statuses) == 0 {
		statuses = []agents.Status{agents.StatusCompleted}
	}
	var kept []*agents.Recording
	dropped := map[string]int{}
	for _, r := range recs {
		run := r.Run
		switch {
		case opts.Agent != "" && run.Agent != opts.Agent:
			dropped["agent"]++
		case !slices.Contains(statuses, run.Status):
			dropped["status"]++
		case (!opts.Since.IsZero() || !opts.Until.IsZero()) && run.UpdatedAt.IsZero():
			dropped["time (not recorded)"]++
		case !opts.Since.IsZero() && run.UpdatedAt.Before(opts.Since), !opts.Until.IsZero() && !run.UpdatedAt.Before(opts.Until):
			dropped["time"]++
		case strings.TrimSpace(run.Input) == "":
			dropped["no input"]++
		default:
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		var why []string
		for _, k := range slices.Sorted(maps.Keys(dropped)) {
			why = append(why, fmt.Sprintf("%d by %s", dropped[k], k))
		}
		return nil, fmt.Errorf("no recorded run of %d passes the filters (dropped %s)", len(recs), strings.Join(why, ", "))
	}
	slices.SortFunc(kept, func(a, b *agents.Recording) int { return strings.Compare(a.Run.RunID, b.Run.RunID) })
	if opts.Sample > 0 && opts.Sample < len(kept) {
		rng := rand.New(rand.NewPCG(opts.Seed, 0x6576616c))
		idx := rng.Perm(len(kept))[:opts.Sample]
		slices.Sort(idx)
		picked := make([]*agents.Recording, len(idx))
		for i, j := range idx {
			picked[i] = kept[j]
		}
		kept = picked
	}
	red := redactor(opts.Redact)
	cases := make([]eval.Case, 0, len(kept))
	for _, r := range kept {
		c := eval.Case{
			ID:       r.Run.RunID,
			Input:    red(r.Run.Input),
			Expected: red(r.Run.Answer),
			Tags:     []string{"agent:" + r.Run.Agent, "status:" + string(r.Run.Status)},
		}
		tools, err := toolAnswers(r.Steps, red)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", r.Run.RunID, err)
		}
		c.Tools = tools
		cases = append(cases, c)
	}
	ds, err := eval.NewDataset(name, "", cases)
	if err != nil {
		return nil, fmt.Errorf("sampling recorded runs: %w", err)
	}
	return ds, nil
}

// redactor replaces every match of every pattern with Redacted.
func redactor(patterns []*regexp.Regexp) func(string) string {
	return func(s string) string {
		for _, p := range patterns {
			s = p.ReplaceAllString(s, Redacted)
		}
		return s
	}
}

// toolAnswers are the calls of declared tools in steps (delegated runs'
// included), redacted, the first of each tool and arguments kept: a
// replayed call is matched by tool and arguments. Handoffs, delegations
// and searches are not declared tools and are left out.
func toolAnswers(steps []agents.StepRecord, red func(string) string) ([]eval.ToolAnswer, error) {
	var out []eval.ToolAnswer
	seen := map[string]bool{}
	var walk func([]agents.StepRecord) error
	walk = func(steps []agents.StepRecord) error {
		for _, st := range steps {
			for _, c := range st.ToolCalls {
				if c.Delegate != nil {
					if err := walk(c.Delegate.Steps); err != nil {
						return err
					}
				}
				if strings.HasPrefix(c.Name, "transfer_to_") || strings.HasPrefix(c.Name, "delegate_to_") || strings.HasPrefix(c.Name, "search_") {
					continue
				}
				args, err := redactJSON(c.Arguments, red)
				if err != nil {
					return fmt.Errorf("call %s of %s: arguments: %w", c.ID, c.Name, err)
				}
				key, err := jsoncanon.Args(args)
				if err != nil {
					return fmt.Errorf("call %s of %s: arguments: %w", c.ID, c.Name, err)
				}
				if seen[c.Name+"\x00"+key] {
					continue
				}
				seen[c.Name+"\x00"+key] = true
				a := eval.ToolAnswer{Tool: c.Name, Args: args}
				obs := red(c.Observation)
				if c.ErrorKind != "" {
					a.Error = strings.TrimPrefix(obs, "error: ")
					if a.Error == "" {
						a.Error = string(c.ErrorKind)
					}
				} else {
					a.Result, _ = json.Marshal(obs) // a string always encodes
				}
				out = append(out, a)
			}
		}
		return nil
	}
	return out, walk(steps)
}

// redactJSON redacts every string (keys aside) of a JSON text and returns
// it compact; empty is the empty object.
func redactJSON(text string, red func(string) string) (json.RawMessage, error) {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage("{}"), nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return red(x)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walk(v)); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), nil
}

// WriteJSONL writes a dataset as JSON Lines, one case a line, in the
// format eval.ParseDatasetJSONL reads.
func WriteJSONL(w io.Writer, ds *eval.Dataset) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, c := range ds.Cases {
		line := struct {
			ID       string            `json:"id"`
			Input    string            `json:"input"`
			Expected string            `json:"expected"`
			Tags     []string          `json:"tags,omitempty"`
			Tools    []eval.ToolAnswer `json:"tools,omitempty"`
		}{c.ID, c.Input, c.Expected, c.Tags, c.Tools}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("writing case %q: %w", c.ID, err)
		}
	}
	return nil
}

// List reads every run f selects from a run store (the service's, through
// its agents.RunLister), page by page, each as the recording its event log
// would hold, so a stored run and an exported log make the same case. f's
// Limit and After are its own: it reads every page.
func List(ctx context.Context, l agents.RunLister, f agents.RunFilter) ([]*agents.Recording, error) {
	f.Limit, f.After = agents.MaxListRuns, ""
	var out []*agents.Recording
	for {
		page, err := l.ListRuns(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("listing the stored runs: %w", err)
		}
		for _, run := range page.Runs {
			var buf bytes.Buffer
			if err := agents.Record(&buf, run, "", "", ""); err != nil {
				return nil, fmt.Errorf("run %s: %w", run.RunID, err)
			}
			rec, err := agents.ReadRecording(&buf)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", run.RunID, err)
			}
			out = append(out, rec)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	if len(out) == 0 {
		return nil, errors.New("the run store holds no run the tenant filter keeps")
	}
	return out, nil
}

// OptionsFor turns a declared source into Options: its statuses, its RFC 3339 times
// and its redaction patterns, each checked with a message that names the field.
func OptionsFor(src eval.RunsSource) (Options, error) {
	opts := Options{Agent: src.Agent, Sample: src.Sample, Seed: src.Seed}
	if src.Sample < 0 {
		return Options{}, fmt.Errorf("sample %d must not be negative", src.Sample)
	}
	for _, st := range src.Statuses {
		opts.Statuses = append(opts.Statuses, agents.Status(st))
	}
	for _, t := range []struct {
		name, value string
		dst         *time.Time
	}{{"since", src.Since, &opts.Since}, {"until", src.Until, &opts.Until}} {
		if t.value == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.value)
		if err != nil {
			return Options{}, fmt.Errorf("%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z: %w", t.name, err)
		}
		*t.dst = v
	}
	for _, p := range src.Redact {
		re, err := regexp.Compile(p)
		if err != nil {
			return Options{}, fmt.Errorf("redact %q: %w", p, err)
		}
		opts.Redact = append(opts.Redact, re)
	}
	return opts, nil
}
