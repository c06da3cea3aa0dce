package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/internal/jsonpos"
)

// BaselineFormat identifies the baseline file format; it is written into every file and
// checked on reading.
const BaselineFormat = "aid-baseline/v1"

// Baseline is the committed reference a gate compares against: per metric, the statistics
// of a past run, with the per-case means that paired tests need.
type Baseline struct {
	// Dataset names the dataset the baseline was measured on.
	Dataset string
	// DatasetVersion is that dataset's version.
	DatasetVersion string
	// Models lists the pinned model ids that produced the baseline's answers.
	Models []string
	// Pins lists, per role and alias, the exact pinned model id and provider the baseline
	// was sampled with (see [CompareModels]). A baseline written before pins were recorded
	// has none.
	Pins []ModelPin
	// AidVersion is the version of aid that wrote the baseline.
	AidVersion string
	// Note is free text for reviewers (why the baseline changed).
	Note string
	// Metrics maps metric names to their statistics.
	Metrics map[string]MetricStats
	// Answers holds, by case id, each run's answer in sample order, each cut
	// at ReportTextBytes (see [Clip]); a failed sample's is empty. A report
	// shows them beside the current answers of a case that regressed. A
	// baseline written before answers were recorded has none.
	Answers map[string][]string
}

// NewBaseline builds a baseline from a run result.
func NewBaseline(r *Result, aidVersion, note string) (*Baseline, error) {
	stats, err := r.Stats()
	if err != nil {
		return nil, fmt.Errorf("build baseline: %w", err)
	}
	if err := checkMetrics(stats); err != nil {
		return nil, fmt.Errorf("build baseline: %w", err)
	}
	if err := checkPins(r.Pins); err != nil {
		return nil, fmt.Errorf("build baseline: %w", err)
	}
	return &Baseline{
		Dataset:        r.Dataset,
		DatasetVersion: r.DatasetVersion,
		Models:         slices.Clone(r.Models),
		Pins:           sortPins(r.Pins),
		AidVersion:     aidVersion,
		Note:           note,
		Metrics:        stats,
		Answers:        baselineAnswers(r),
	}, nil
}

// baselineAnswers collects each case's answers, cut, in sample order.
func baselineAnswers(r *Result) map[string][]string {
	out := make(map[string][]string, len(r.Cases))
	for _, cr := range r.Cases {
		a := make([]string, len(cr.Samples))
		for k, s := range cr.Samples {
			a[k] = Clip(s.Answer.Text, ReportTextBytes)
		}
		out[cr.CaseID] = a
	}
	return out
}

// The wire types declare their fields in sorted order; encoding/json sorts map keys, so
// every object in the file has sorted keys. PinnedModels is left out when empty, so a
// baseline written before pins were recorded reads and rewrites to the same bytes.
type baselineWire struct {
	AidVersion     string                `json:"aidVersion"`
	Answers        map[string][]string   `json:"answers,omitempty"`
	Dataset        string                `json:"dataset"`
	DatasetVersion string                `json:"datasetVersion"`
	Format         string                `json:"format"`
	Metrics        map[string]metricWire `json:"metrics"`
	Models         []string              `json:"models"`
	Note           string                `json:"note"`
	PinnedModels   []pinWire             `json:"pinnedModels,omitempty"`
}

// pinWire is a [ModelPin] in a baseline file, its keys sorted.
type pinWire struct {
	Alias    string    `json:"alias"`
	Model    string    `json:"model"`
	Provider string    `json:"provider"`
	Role     ModelRole `json:"role"`
}

type metricWire struct {
	CaseMeans          map[string]fixed6 `json:"caseMeans"`
	Cases              int               `json:"cases"`
	Errors             int               `json:"errors"`
	Groups             map[string]string `json:"groups,omitempty"`
	Mean               fixed6            `json:"mean"`
	ModelDerived       bool              `json:"modelDerived"`
	Runs               int               `json:"runs"`
	StdDev             fixed6            `json:"stdDev"`
	StdErr             fixed6            `json:"stdErr"`
	WithinCaseVariance fixed6            `json:"withinCaseVariance"`
	Calibration        *calibrationWire  `json:"calibration,omitempty"`
}

// calibrationWire is a judge calibration as a baseline keeps it: its counts, from which
// every other figure follows.
type calibrationWire struct {
	Positives     int `json:"positives"`
	TruePositives int `json:"truePositives"`
	Negatives     int `json:"negatives"`
	TrueNegatives int `json:"trueNegatives"`
}

// fixed6 is a float written with exactly six decimals, so that diffs show real changes
// and never a change of float formatting.
type fixed6 float64

// MarshalJSON writes the value with six decimals; NaN and infinities are refused.
func (f fixed6) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("cannot write %v to a baseline", v)
	}
	s := strconv.FormatFloat(v, 'f', 6, 64)
	if s == "-0.000000" {
		s = "0.000000"
	}
	return []byte(s), nil
}

// UnmarshalJSON reads any JSON number.
func (f *fixed6) UnmarshalJSON(b []byte) error {
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = fixed6(v)
	return nil
}

// MarshalBaseline encodes the baseline in its stable form: sorted keys, two-space
// indentation, every number with six decimals, and a trailing newline. The same baseline
// always encodes to the same bytes.
func MarshalBaseline(b *Baseline) ([]byte, error) {
	if err := checkMetrics(b.Metrics); err != nil {
		return nil, fmt.Errorf("encode baseline: %w", err)
	}
	if err := checkPins(b.Pins); err != nil {
		return nil, fmt.Errorf("encode baseline: %w", err)
	}
	w := baselineWire{
		AidVersion: b.AidVersion, Dataset: b.Dataset, DatasetVersion: b.DatasetVersion,
		Format: BaselineFormat, Models: b.Models, Note: b.Note,
		Metrics: make(map[string]metricWire, len(b.Metrics)), Answers: b.Answers,
	}
	if w.Models == nil {
		w.Models = []string{}
	}
	w.Models = slices.Sorted(slices.Values(w.Models))
	for _, p := range sortPins(b.Pins) {
		w.PinnedModels = append(w.PinnedModels, pinWire{Alias: p.Alias, Model: p.Model, Provider: p.Provider, Role: p.Role})
	}
	for name, m := range b.Metrics {
		cm := make(map[string]fixed6, len(m.CaseMeans))
		for id, v := range m.CaseMeans {
			cm[id] = fixed6(v)
		}
		w.Metrics[name] = metricWire{
			CaseMeans: cm, Cases: m.Cases, Errors: m.Errors, Mean: fixed6(m.Mean),
			ModelDerived: m.ModelDerived, Runs: m.Runs, StdDev: fixed6(m.StdDev),
			StdErr: fixed6(m.StdErr), WithinCaseVariance: fixed6(m.WithinCaseVariance),
			Groups: m.Groups,
		}
		if c := m.Calibration; c != nil {
			mw := w.Metrics[name]
			mw.Calibration = &calibrationWire{Positives: c.Positives, TruePositives: c.TruePositives, Negatives: c.Negatives, TrueNegatives: c.TrueNegatives}
			w.Metrics[name] = mw
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(w); err != nil { // Encode ends with the trailing newline
		return nil, fmt.Errorf("encode baseline: %w", err)
	}
	return buf.Bytes(), nil
}

// ParseBaseline decodes a baseline file; name is used in error positions.
func ParseBaseline(name string, data []byte) (*Baseline, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w baselineWire
	if err := dec.Decode(&w); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%s: invalid JSON: %w", jsonpos.LineCol(name, data, max(0, se.Offset-1)), err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s: field %s: got a JSON %s, want %s", jsonpos.LineCol(name, data, max(0, te.Offset-1)), te.Field, te.Value, te.Type)
		default:
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the baseline object", name)
	}
	if w.Format != BaselineFormat {
		return nil, fmt.Errorf("%s: format %q is not %q; regenerate the baseline with --update-baseline", name, w.Format, BaselineFormat)
	}
	b := &Baseline{
		Dataset: w.Dataset, DatasetVersion: w.DatasetVersion, Models: w.Models,
		AidVersion: w.AidVersion, Note: w.Note, Metrics: make(map[string]MetricStats, len(w.Metrics)),
		Answers: w.Answers,
	}
	var errs []error
	for _, p := range w.PinnedModels {
		b.Pins = append(b.Pins, ModelPin{Role: p.Role, Alias: p.Alias, Model: p.Model, Provider: p.Provider})
	}
	if err := checkPins(b.Pins); err != nil {
		errs = append(errs, fmt.Errorf("pinnedModels: %w", err))
	}
	b.Pins = sortPins(b.Pins)
	for _, name := range slices.Sorted(maps.Keys(w.Metrics)) {
		m := w.Metrics[name]
		st := MetricStats{
			ModelDerived: m.ModelDerived, Runs: m.Runs, Cases: m.Cases, Mean: float64(m.Mean),
			StdDev: float64(m.StdDev), StdErr: float64(m.StdErr),
			WithinCaseVariance: float64(m.WithinCaseVariance), Errors: m.Errors,
		}
		if len(m.Groups) > 0 {
			st.Groups = m.Groups // a baseline written before groups existed has none
		}
		if c := m.Calibration; c != nil {
			cal, err := JudgeCalibration{Positives: c.Positives, TruePositives: c.TruePositives, Negatives: c.Negatives, TrueNegatives: c.TrueNegatives}.Check()
			if err != nil {
				errs = append(errs, fmt.Errorf("metric %q: calibration: %w", name, err))
				continue
			}
			st.Calibration = &cal
		}
		if len(m.CaseMeans) > 0 {
			st.CaseMeans = make(map[string]float64, len(m.CaseMeans))
			for id, v := range m.CaseMeans {
				st.CaseMeans[id] = float64(v)
			}
		}
		if err := checkStats(st); err != nil {
			errs = append(errs, fmt.Errorf("metric %q: %w", name, err))
			continue
		}
		b.Metrics[name] = st
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", name, errors.Join(errs...))
	}
	return b, nil
}

// checkStats rejects statistics no run could have produced: non-finite or out-of-range
// numbers, counts below 1, case means that do not match the case count, groups of
// unknown cases. It is the one validation of [MetricStats], used by [NewBaseline],
// [MarshalBaseline], [ParseBaseline] and [Gate], so that a baseline that can be written
// can also be read.
func checkStats(st MetricStats) error {
	var errs []error
	if st.Runs < 1 {
		errs = append(errs, fmt.Errorf("runs %d must be at least 1", st.Runs))
	}
	if st.Cases < 1 {
		errs = append(errs, fmt.Errorf("cases %d must be at least 1", st.Cases))
	}
	if st.Errors < 0 {
		errs = append(errs, fmt.Errorf("errors %d must not be negative", st.Errors))
	}
	if !inUnit(st.Mean) {
		errs = append(errs, fmt.Errorf("mean %v is not a finite number in [0, 1]", st.Mean))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"stdDev", st.StdDev}, {"stdErr", st.StdErr}, {"withinCaseVariance", st.WithinCaseVariance}} {
		if !finite(f.v) || f.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v must be a finite number at least 0", f.name, f.v))
		}
	}
	if st.CaseMeans != nil && len(st.CaseMeans) != st.Cases {
		errs = append(errs, fmt.Errorf("has %d case means for %d cases", len(st.CaseMeans), st.Cases))
	}
	for _, id := range slices.Sorted(maps.Keys(st.CaseMeans)) {
		if v := st.CaseMeans[id]; !inUnit(v) {
			errs = append(errs, fmt.Errorf("case %q: mean %v is not a finite number in [0, 1]", id, v))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Groups)) {
		if _, ok := st.CaseMeans[id]; !ok {
			errs = append(errs, fmt.Errorf("groups: case %q has no case mean", id))
		}
		if st.Groups[id] == "" {
			errs = append(errs, fmt.Errorf("groups: case %q has an empty group", id))
		}
	}
	return errors.Join(errs...)
}

// checkMetrics applies checkStats to every metric, in name order.
func checkMetrics(metrics map[string]MetricStats) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(metrics)) {
		if err := checkStats(metrics[name]); err != nil {
			errs = append(errs, fmt.Errorf("metric %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// ReadBaseline reads and checks a baseline file.
func ReadBaseline(path string) (*Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	return ParseBaseline(path, data)
}

// WriteBaselineFile writes the baseline atomically: it writes a temporary file in the
// same directory, syncs it and renames it over path, so a reader never sees a partial
// file and a failed write leaves the old baseline in place.
func WriteBaselineFile(path string, b *Baseline) (err error) {
	data, err := MarshalBaseline(b)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	return nil
}

// BaselineChange is one difference between two baselines.
type BaselineChange struct {
	// Path names the field, such as "metrics.exact_match.mean" or
	// "metrics.exact_match.caseMeans.fr".
	Path string `json:"path"`
	// Old is the formatted old value; empty when the field is absent from the old baseline.
	Old string `json:"old"`
	// New is the formatted new value; empty when the field is absent from the new baseline.
	New string `json:"new"`
}

// String formats the change as "path: old → new".
func (c BaselineChange) String() string {
	old, nw := c.Old, c.New
	if old == "" {
		old = "(none)"
	}
	if nw == "" {
		nw = "(none)"
	}
	return fmt.Sprintf("%s: %s → %s", c.Path, old, nw)
}

// DiffBaselines lists what changed from old to new, in a stable order: header fields,
// then metrics by name (runs, cases, mean, spreads, errors, then case means and groups
// by id). old
// may be nil, for a first baseline; cur is the new one. Values are compared as written, with six decimals.
func DiffBaselines(old, cur *Baseline) []BaselineChange {
	if old == nil {
		old = &Baseline{}
	}
	var out []BaselineChange
	add := func(path, a, b string) {
		if a != b {
			out = append(out, BaselineChange{Path: path, Old: a, New: b})
		}
	}
	add("dataset", old.Dataset, cur.Dataset)
	add("datasetVersion", old.DatasetVersion, cur.DatasetVersion)
	add("aidVersion", old.AidVersion, cur.AidVersion)
	add("models", strings.Join(old.Models, ", "), strings.Join(cur.Models, ", "))
	diffPins(old.Pins, cur.Pins, add)
	add("note", old.Note, cur.Note)
	names := slices.Sorted(maps.Keys(old.Metrics))
	for n := range cur.Metrics {
		if _, ok := old.Metrics[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		o, inOld := old.Metrics[n]
		w, inNew := cur.Metrics[n]
		p := "metrics." + n
		switch {
		case !inOld:
			add(p, "", fmt.Sprintf("mean %s over %d cases × %s", f6(w.Mean), w.Cases, nRuns(w.Runs)))
			continue
		case !inNew:
			add(p, fmt.Sprintf("mean %s over %d cases × %s", f6(o.Mean), o.Cases, nRuns(o.Runs)), "")
			continue
		}
		add(p+".runs", strconv.Itoa(o.Runs), strconv.Itoa(w.Runs))
		add(p+".cases", strconv.Itoa(o.Cases), strconv.Itoa(w.Cases))
		if a, b := f6(o.Mean), f6(w.Mean); a != b {
			out = append(out, BaselineChange{Path: p + ".mean", Old: a, New: fmt.Sprintf("%s (%+.6f)", b, w.Mean-o.Mean)})
		}
		add(p+".stdDev", f6(o.StdDev), f6(w.StdDev))
		add(p+".stdErr", f6(o.StdErr), f6(w.StdErr))
		add(p+".withinCaseVariance", f6(o.WithinCaseVariance), f6(w.WithinCaseVariance))
		add(p+".errors", strconv.Itoa(o.Errors), strconv.Itoa(w.Errors))
		add(p+".modelDerived", strconv.FormatBool(o.ModelDerived), strconv.FormatBool(w.ModelDerived))
		ids := slices.Sorted(maps.Keys(o.CaseMeans))
		for id := range w.CaseMeans {
			if _, ok := o.CaseMeans[id]; !ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			a, okA := o.CaseMeans[id]
			b, okB := w.CaseMeans[id]
			sa, sb := "", ""
			if okA {
				sa = f6(a)
			}
			if okB {
				sb = f6(b)
			}
			add(p+".caseMeans."+id, sa, sb)
		}
		gids := slices.Sorted(maps.Keys(o.Groups))
		for id := range w.Groups {
			if _, ok := o.Groups[id]; !ok {
				gids = append(gids, id)
			}
		}
		slices.Sort(gids)
		for _, id := range gids {
			add(p+".groups."+id, o.Groups[id], w.Groups[id])
		}
	}
	return out
}

func f6(v float64) string {
	b, err := fixed6(v).MarshalJSON()
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// diffPins reports the pinned models per role and alias, as "pinnedModels.<role>.<alias>:
// model (provider) → model (provider)", target first.
func diffPins(old, cur []ModelPin, add func(path, a, b string)) {
	type key struct {
		role  ModelRole
		alias string
	}
	var keys []key
	vals := func(pins []ModelPin) map[key]string {
		m := map[key]string{}
		for _, p := range sortPins(pins) {
			k := key{p.Role, p.Alias}
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			} else {
				m[k] += ", "
			}
			m[k] += p.Model + " (" + p.Provider + ")"
		}
		return m
	}
	o, c := vals(old), vals(cur)
	slices.SortFunc(keys, func(a, b key) int {
		return comparePins(ModelPin{Role: a.role, Alias: a.alias}, ModelPin{Role: b.role, Alias: b.alias})
	})
	for _, k := range slices.Compact(keys) {
		add("pinnedModels."+string(k.role)+"."+k.alias, o[k], c[k])
	}
}
