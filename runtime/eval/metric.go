package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

// Names of the built-in metrics, as the IR and the [Registry] spell them.
const (
	MetricExactMatch         = "exact_match"
	MetricNormalizedContains = "normalized_contains"
	MetricJSONSchemaValid    = "json_schema_valid"
	MetricLLMJudge           = "llm_judge"
	MetricGuardrailBlocked   = "guardrail_blocked"
	MetricGuardrailTripped   = "guardrail_tripped"
)

// Metric scores one answer to one case.
//
// Implementations must be safe for concurrent use: [Run] scores samples from several
// goroutines at once.
type Metric interface {
	// Name is the metric's name in thresholds, reports and baselines.
	Name() string
	// ModelDerived reports whether the score comes from a model (an LLM judge). Such a
	// metric may be reported, and gates only when calibrated against human labels (see
	// [JudgeCalibration]), because its own errors would move the gate.
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
// Normalisation, in order:
//
//  1. Unicode NFKC, so full-width letters and digits, ligatures and the like compare
//     equal to their plain forms ("２０．００" is "20.00").
//  2. Full Unicode case folding ("Straße" matches "STRASSE").
//  3. Removal of accents (NFD then dropping non-spacing marks, so "Bogota" matches
//     "Bogotá"), unless KeepAccents.
//  4. Numbers stay whole: a full stop or comma with a digit on each side is part of the
//     number, so "20.00" stays "20.00" (never "2000") and "1,000" stays "1,000".
//     Numbers are compared as written: "20" does not match "20.00".
//  5. Every other full stop and apostrophe is deleted, because it joins the parts of one
//     word: "D.C." matches "DC", "d'Ivoire" matches "dIvoire", and a sentence's final
//     full stop goes.
//  6. Every other punctuation character separates words ("2024-06-03" is the words
//     2024, 06, 03, and matches "2024 06 03"), and so does white space.
//  7. A currency symbol is a word of its own, so "$20.00" holds the words "$" and
//     "20.00" and contains "20.00"; other symbols ("+", "°") stay in their word.
//  8. A letter of a script written without spaces between words (Han, Hiragana,
//     Katakana, Thai, Lao, Khmer, Myanmar) is a word of its own, so "東京" is found in
//     "首都は東京です".
//
// The expected words must then appear contiguously in the answer's words: "Paris" is
// found in "It is Paris." but not in "Parisian". Accents are dropped by default because an
// answer that only misses an accent is right for nearly every use of an eval; set
// KeepAccents when accents carry meaning.
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
	rs := []rune(s)
	var words []string
	var word []rune
	flush := func() {
		if len(word) > 0 {
			words = append(words, string(word))
			word = word[:0]
		}
	}
	for i, r := range rs {
		switch {
		case (r == '.' || r == ',') && i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]):
			word = append(word, r) // a decimal point or a thousands separator
		case r == '.' || r == '\'' || r == '’' || r == '‘':
			// joins parts of one word: "D.C.", "d'Ivoire"
		case unicode.IsSpace(r) || unicode.IsPunct(r):
			flush()
		case unicode.Is(unicode.Sc, r) || unspaced(r):
			flush()
			words = append(words, string(r))
		default:
			word = append(word, r)
		}
	}
	flush()
	return words
}

// unspaced reports whether r is a letter of a script written without spaces between
// words, which normalisation takes as a word of its own.
func unspaced(r rune) bool {
	return r >= 0x0E00 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
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

// AnswerMetric is a [Metric] that scores the whole [Answer], not only its text: [Run]
// calls ScoreAnswer instead of Score for a metric that implements it.
type AnswerMetric interface {
	Metric
	// ScoreAnswer scores the answer as Score does its text.
	ScoreAnswer(ctx context.Context, c Case, ans Answer) (float64, error)
}

// GuardrailBlocked scores 1 when the guardrails did to the sample's run what the case
// expects, and 0 otherwise: a case expects its run blocked unless its "blocked" field is
// false (see [Case.Blocked]). Over an injection set, the mean is the share of injections
// blocked; with benign cases marked "blocked": false among them, it is the share of cases
// the guardrails got right, so a false positive costs as much as a miss.
type GuardrailBlocked struct{}

// Name returns "guardrail_blocked".
func (GuardrailBlocked) Name() string { return MetricGuardrailBlocked }

// ModelDerived returns false.
func (GuardrailBlocked) ModelDerived() bool { return false }

// Score cannot tell whether the run was blocked from the text alone, so it refuses;
// [Run] calls ScoreAnswer.
func (GuardrailBlocked) Score(context.Context, Case, string) (float64, error) {
	return 0, errors.New("guardrail_blocked scores an answer's run, not its text; score it with ScoreAnswer")
}

// ScoreAnswer compares whether the run was blocked with what the case expects.
func (GuardrailBlocked) ScoreAnswer(_ context.Context, c Case, ans Answer) (float64, error) {
	want := c.Blocked == nil || *c.Blocked
	if ans.Blocked == want {
		return 1, nil
	}
	return 0, nil
}

// GuardrailTripped scores 1 when the guardrails that tripped in the sample's run (blocked,
// redacted, asked or logged: [Answer.Tripped]) are the ones the case expects, and 0
// otherwise. A case names the guardrails it expects to trip in its "tripped" field (see
// [Case.Tripped]): exactly those must trip, in any order, and no other; "tripped": []
// expects none to. A case without the field expects at least one guardrail to trip. Over a
// set of PII cases, the mean is the share of cases whose redactions, and only those, fired;
// with benign cases marked "tripped": [] among them, a false positive costs as much as a miss.
type GuardrailTripped struct{}

// Name returns "guardrail_tripped".
func (GuardrailTripped) Name() string { return MetricGuardrailTripped }

// ModelDerived returns false.
func (GuardrailTripped) ModelDerived() bool { return false }

// Score cannot tell which guardrails tripped from the text alone, so it refuses; [Run]
// calls ScoreAnswer.
func (GuardrailTripped) Score(context.Context, Case, string) (float64, error) {
	return 0, errors.New("guardrail_tripped scores an answer's run, not its text; score it with ScoreAnswer")
}

// ScoreAnswer compares the guardrails that tripped with those the case expects.
func (GuardrailTripped) ScoreAnswer(_ context.Context, c Case, ans Answer) (float64, error) {
	if c.Tripped == nil {
		if len(ans.Tripped) > 0 {
			return 1, nil
		}
		return 0, nil
	}
	if len(ans.Tripped) != len(c.Tripped) {
		return 0, nil
	}
	for _, g := range c.Tripped {
		if !slices.Contains(ans.Tripped, g) {
			return 0, nil
		}
	}
	return 1, nil
}
