package gen_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/depcheck"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// TestLinksNoCUE keeps the generator free of CUE and of the IR: it reads a
// description, which aidgen build lowers first, so that generating a
// service does not link the 96 packages of CUE's evaluator. Nor does it
// link a kind: the description holds the kinds' values, and Literal spells
// them by reflection.
func TestLinksNoCUE(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/gen") {
		switch {
		case strings.HasPrefix(dep, "cuelang.org/"), dep == "github.com/aidgen/aid/ir", dep == "github.com/aidgen/aid/internal/lower",
			strings.HasPrefix(dep, "github.com/openai/"), strings.HasPrefix(dep, "github.com/jackc/"):
			t.Errorf("gen links %s", dep)
		}
	}
}

// TestLiteralRefuses checks that a value a literal cannot hold is an error
// naming where it is, never a silently dropped field.
func TestLiteralRefuses(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"func", struct{ F func() }{F: func() {}}, ".F is a func"},
		{"chan", struct{ C chan int }{C: make(chan int)}, ".C is a chan"},
		{"func in an interface", struct{ I any }{I: func() {}}, ".I is a func"},
		{"unexported", struct{ x int }{x: 1}, ".x is unexported"},

		{"nan float", struct{ F float64 }{F: nan}, ".F is NaN"},
		{"nan in a pointer", app.Description{Agents: nil, Models: nil, Providers: []app.Provider{{Kind: fake.Kind{AnswerKey: &fake.AnswerKeyFile{Accuracy: nan}}}}}, "Providers[0].Kind.AnswerKey.Accuracy is NaN"},
		{"nil", nil, "nil interface"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gen.Literal(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Literal: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestLiteralSpelling checks the spellings a reader sees: durations in
// their largest unit, pointers to basic values through new, maps sorted,
// an empty slice kept apart from a nil one, and what an interface holds
// with its own type, so that it keeps it.
func TestLiteralSpelling(t *testing.T) {
	half := 0.5
	v := struct {
		D, E, F time.Duration
		P       *float64
		M       map[string]string
		Empty   []string
		Nil     []string
		Text    string
		Kind    any
		Ptr     any
		Named   any
		Zero    any
		NilPtr  any
		None    any
	}{D: 90 * time.Second, E: time.Hour, F: 1500 * time.Microsecond, P: &half, M: map[string]string{"b": "2", "a": "1", "c": "3"}, Empty: []string{}, Text: "a\nb",
		Kind: jen.Options{Open: "(", Multi: true}, Ptr: &jen.Options{Close: ")"}, Named: time.Minute, Zero: time.Duration(0), NilPtr: (*jen.Options)(nil)}
	code, err := gen.Literal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(strings.ReplaceAll(fmtCode(code), ",", " ")), " ")
	for _, want := range []string{
		"D: 90 * time.Second", "E: time.Hour", "F: 1500 * time.Microsecond",
		"P: new(float64(0.5))", `M: map[string]string{ "a": "1" "b": "2" "c": "3" }`, "Empty: []string{}", "Text: `a\nb`",
		`Kind: jen.Options{ Open: "(" Multi: true }`, `Ptr: &jen.Options{ Close: ")" }`, "Named: time.Minute", "Zero: time.Duration(0)", "NilPtr: (*jen.Options)(nil)",
	} {
		want = strings.Join(strings.Fields(strings.ReplaceAll(want, ",", " ")), " ")
		if !strings.Contains(got, want) {
			t.Errorf("literal lacks %q:\n%s", want, got)
		}
	}
	for _, zero := range []string{"Nil:", "None:"} {
		if strings.Contains(got, zero) {
			t.Errorf("literal spells the nil field %s\n%s", zero, got)
		}
	}
}

func fmtCode(c jen.Code) string { return fmt.Sprintf("%#v", jen.Null().Add(c)) }
