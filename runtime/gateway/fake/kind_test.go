package fake_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// TestKind builds the provider from its configuration: the script and the
// answer key come from the application's files (here, a file system, as a
// generated service embeds them), env.Seed wins over the configuration's,
// and a call is never retried.
func TestKind(t *testing.T) {
	files := fstest.MapFS{
		"app/script.json": {Data: []byte(`{"agents": {"desk": [{"text": "hello"}]}}`)},
		"app/qa.jsonl":    {Data: []byte(`{"id": "a", "input": "Capital of France?", "expected": "Paris"}` + "\n")},
	}
	k := fake.Kind{Seed: 3, Script: "script.json", AnswerKey: &fake.AnswerKeyFile{Dataset: "qa.jsonl", Accuracy: 1}}
	if k.ProviderKind() != kind.ProviderFake || k.RetryPolicy().MaxAttempts != 1 {
		t.Errorf("kind %q, retry policy %+v", k.ProviderKind(), k.RetryPolicy())
	}
	seed := int64(9)
	p, err := k.NewProvider(t.Context(), kind.Env{Files: kind.FSFiles(files, "app"), Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Generate(t.Context(), gateway.ModelSpec{ID: "m"}, gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Capital of France?"}}, MaxOutputTokens: 10})
	if err != nil || res.Text != "Paris" {
		t.Errorf("an answer key call = %q, %v", res.Text, err)
	}

	k.Script, k.AnswerKey.Dataset = "missing.json", "missing.jsonl"
	_, err = k.NewProvider(t.Context(), kind.Env{Files: kind.FSFiles(files, "app")})
	for _, want := range []string{"loading the answer key", "missing.jsonl", "loading the agent script", "missing.json"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing files: %v, want it to say %q", err, want)
		}
	}
}
