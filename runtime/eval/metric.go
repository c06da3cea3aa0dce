package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/aidgen/aid/internal/jsonschemas"
)

// Names of the built-in metrics, as the IR and the [Registry] spell them.
const (
	MetricExactMatch         = "exact_match"
	MetricNormalizedContains = "normalized_contains"
	MetricJSONSchemaValid    = "json_schema_valid"
	MetricLLMJudge           = "llm_judge"
)

// Metric scores one answer to one case.
//
// Implementations must be safe for concurrent use: [Run] scores samples from several
// goroutines at once.
type Metric interface {
	// Name is the metric's name in thresholds, reports and baselines.
	Name() string
	// ModelDerived reports whether the score comes from a model (an LLM judge). Such a
	// metric may be reported but may never gate, because its own drift would move the gate.
	ModelDerived() bool
	// Score returns a score in [0, 1]. An error means the metric could not score the answer
	// (not that the answer is wrong); [Run] then records the error and scores the sample 0.
	Score(ctx context.Context, c Case, answer string) (float64, error)
}

// ExactMatch scores 1 when the answer equals the expected answer after trimming
// surrounding white space from both, and 0 otherwise.
//
// Nothing else is forgiven (case, inner spacing, punctuation, Unicode forms), so the
// metric is a strict floor; [NormalizedContains] is the forgiving one.
type ExactMatch struct{}

// Name returns "exact_match".
func (ExactMatch) Name() string { return MetricExactMatch }

// ModelDerived returns false.
func (ExactMatch) ModelDerived() bool { return false }

// Score compares the trimmed answer with the trimmed expected answer.
func (ExactMatch) Score(_ context.Context, c Case, answer string) (float64, error) {
	if strings.TrimSpace(answer) == strings.TrimSpace(c.Expected) {
		return 1, nil
	}
	return 0, nil
}

// NormalizedContains scores 1 when the normalized expected answer occurs in the normalized
// answer as a whole sequence of words, and 0 otherwise.
//
// Normalisation, in order: Unicode NFKC (so full-width letters, ligatures and the like
// compare equal to their plain forms), full Unicode case folding ("Straße" matches
// "STRASSE"), removal of accents (NFD then dropping non-spacing marks, so "Bogota" matches
// "Bogotá"), deletion of the punctuation that joins parts of one word (full stops and
// apostrophes, so "D.C." matches "DC" and "d'Ivoire" matches "dIvoire"), replacement of
// every other punctuation character by a space, and collapsing of white space. The
// expected words must then appear contiguously in the answer's words:
// "Paris" is found in "It is Paris." but not in "Parisian". Accents are dropped by default
// because an answer that only misses an accent is right for nearly every use of an eval;
// set KeepAccents when accents carry meaning. Symbols such as "+" or "$" are kept.
type NormalizedContains struct {
	// KeepAccents keeps combining marks, so "Bogota" no longer matches "Bogotá".
	KeepAccents bool
}

// Name returns "normalized_contains".
func (NormalizedContains) Name() string { return MetricNormalizedContains }

// ModelDerived returns false.
func (NormalizedContains) ModelDerived() bool { return false }

// Score reports whether the normalized expected words occur in the normalized answer.
func (m NormalizedContains) Score(_ context.Context, c Case, answer string) (float64, error) {
	want := m.Normalize(c.Expected)
	if len(want) == 0 {
		return 0, fmt.Errorf("case %q: expected answer %q is empty after normalisation", c.ID, c.Expected)
	}
	got := m.Normalize(answer)
	for i := 0; i+len(want) <= len(got); i++ {
		if equalWords(got[i:i+len(want)], want) {
			return 1, nil
		}
	}
	return 0, nil
}

// Normalize returns the words of s after the normalisation described on the type.
func (m NormalizedContains) Normalize(s string) []string {
	s = norm.NFKC.String(s)
	s = cases.Fold().String(s)
	if !m.KeepAccents {
		t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
		if out, _, err := transform.String(t, s); err == nil {
			s = out
		}
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case '.', '\'', '’', '‘':
			return -1 // joins parts of one word: "D.C.", "d'Ivoire"
		}
		return r
	}, s)
	return strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// JSONSchemaValid scores 1 when the answer is a single JSON value that validates against
// a JSON Schema, and 0 otherwise (including when the answer is not JSON at all).
//
// The answer must be the JSON value itself: a Markdown code fence around it is not
// removed, because a target that must emit JSON should be held to emitting JSON. The
// schema must be self-contained: references to other documents are refused rather than
// fetched, so that scoring never reads the network or the file system.
type JSONSchemaValid struct {
	schema *jsonschema.Schema
}

// NewJSONSchemaValid compiles the schema (JSON text, draft 2020-12 unless the schema's
// $schema says otherwise).
func NewJSONSchemaValid(schema []byte) (*JSONSchemaValid, error) {
	sch, err := jsonschemas.Compile("urn:aid:eval:answer-schema", schema)
	if err != nil {
		return nil, fmt.Errorf("json_schema_valid: %w", err)
	}
	return &JSONSchemaValid{schema: sch}, nil
}

// Name returns "json_schema_valid".
func (*JSONSchemaValid) Name() string { return MetricJSONSchemaValid }

// ModelDerived returns false.
func (*JSONSchemaValid) ModelDerived() bool { return false }

// Score validates the answer against the schema.
func (m *JSONSchemaValid) Score(_ context.Context, _ Case, answer string) (float64, error) {
	if m == nil || m.schema == nil {
		return 0, errors.New("json_schema_valid: metric has no schema; use NewJSONSchemaValid")
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(answer))
	if err != nil {
		return 0, nil
	}
	if err := m.schema.Validate(v); err != nil {
		return 0, nil
	}
	return 1, nil
}
