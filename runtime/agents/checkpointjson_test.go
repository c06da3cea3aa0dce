package agents

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// tricky are strings that encoding/json writes escaped, each in its own
// way: quotes and backslashes, control characters with and without a short
// escape, HTML's three, invalid UTF-8, U+2028 and U+2029, and multi-byte
// runes that need none.
var tricky = []string{
	"", "a", `{"status":"shipped"}`, `C:\path`, "line\nnext\r\t\b\f", "\x00\x01\x1f\x7f", "<b>&amp;</b>",
	"\xff\xfe", "a\xc3", "\u2028\u2029", "héllo wörld ✓ 😀", "\u00e9\u0301", "\"", "\\", "end\\",
}

// fill sets v, and every field of every struct within it, to values drawn
// from rng: a field is left zero with probability 1-p, so that p=1 sets
// every field a checkpoint has, the ones added after this test included.
func fill(rng *rand.Rand, v reflect.Value, p float64, depth int) {
	if rng.Float64() >= p && depth > 0 {
		return
	}
	switch {
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		raws := []string{`{"a": [1, 2.5, "x<y"], "b": null}`, `"s"`, ` 12 `, `[ ]`}
		v.SetBytes([]byte(raws[rng.IntN(len(raws))]))
		return
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()))
		return
	case v.Type() == reflect.TypeFor[time.Duration]():
		v.SetInt(rng.Int64N(1e12))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(tricky[rng.IntN(len(tricky))] + tricky[rng.IntN(len(tricky))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rng.Int64N(2000) - 1000)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64N(1000))
	case reflect.Float32, reflect.Float64:
		floats := []float64{0, 1, -1, 0.0001, 1e-7, 3.2e-9, 1.5e21, 123456789.125, 1e20, -2.5e-7, rng.Float64()}
		v.SetFloat(floats[rng.IntN(len(floats))])
	case reflect.Pointer:
		if depth > 6 {
			return
		}
		n := reflect.New(v.Type().Elem())
		fill(rng, n.Elem(), p, depth+1)
		v.Set(n)
	case reflect.Slice:
		if depth > 6 {
			return
		}
		n := rng.IntN(4)
		if p == 1 {
			n = 1 + rng.IntN(3)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), p, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if depth > 6 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(3) + 1 {
			k := reflect.New(v.Type().Key()).Elem()
			fill(rng, k, 1, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(rng, e, p, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), p, depth+1)
			}
		}
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(tricky[rng.IntN(len(tricky))]))
		}
	}
}

// TestCheckpointEncodingIsJSONs holds encodeCheckpoint to encoding/json's
// bytes: checkpoints with every field set, with each field set or not at
// random, and with empty and nil slices.
func TestCheckpointEncodingIsJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(t *testing.T, cp *Checkpoint) {
		t.Helper()
		want, werr := json.Marshal(cp)
		got, gerr := encodeCheckpoint(cp)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("encoding/json: %v, encodeCheckpoint: %v", werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodings differ\n got %s\nwant %s", got, want)
		}
	}
	for i := range 400 {
		var cp Checkpoint
		p := 0.6
		if i%4 == 0 {
			p = 1
		}
		fill(rng, reflect.ValueOf(&cp).Elem(), p, 1)
		check(t, &cp)
	}
	check(t, &Checkpoint{})
	check(t, &Checkpoint{Path: []string{}, Messages: []SavedMessage{}, Steps: []StepRecord{{Request: &RequestRecord{}}}})
	check(t, &Checkpoint{Steps: []StepRecord{{Request: &RequestRecord{Messages: []SavedMessage{}, Tools: []string{}}}}})
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		check(t, &Checkpoint{CostUSD: f})
		check(t, &Checkpoint{Steps: []StepRecord{{CostUSD: f}}})
	}
	check(t, &Checkpoint{Messages: []SavedMessage{{Reasoning: json.RawMessage(`{not json`)}}})
}

// FuzzCheckpointStrings holds encodeCheckpoint's strings to encoding/json's
// escaping, whatever the bytes.
func FuzzCheckpointStrings(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cp := Checkpoint{RunID: s, Messages: []SavedMessage{{Role: "tool", Content: s}}, Steps: []StepRecord{{Text: s, ToolCalls: []ToolCallRecord{{Observation: s}}}}}
		want, _ := json.Marshal(&cp)
		got, err := encodeCheckpoint(&cp)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: %v\n got %s\nwant %s", s, err, got, want)
		}
	})
}

// BenchmarkEncodeCheckpoint encodes a 20-step run's checkpoint with
// encodeCheckpoint and with encoding/json.
func BenchmarkEncodeCheckpoint(b *testing.B) {
	r := benchRuntime(b)
	r.gen = stubModel{steps: 20}
	res, err := r.Run(b.Context(), "a", "where is order A-1?", RunOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rec, err := r.store.LoadRun(b.Context(), res.RunID)
	if err != nil {
		b.Fatal(err)
	}
	cp := rec.Checkpoint
	b.Run("aid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeCheckpoint(&cp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&cp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
