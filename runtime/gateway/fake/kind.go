package fake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aidgen/aid/runtime/eval/dataset"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// Kind is the configuration of a provider of kind fake, as the IR spells it
// (providers: NAME: {kind: "fake", seed, latency, answerKey, script}). It
// is plain data, so a generated service holds it as a literal; NewProvider
// reads the files it names and builds a Provider from a Config.
type Kind struct {
	// Seed seeds the answer key's coin and the embeddings.
	Seed int64 `json:"seed,omitempty"`
	// Latency delays every call.
	Latency time.Duration `json:"latency,omitempty"`
	// AnswerKey, when set, makes the provider answer an eval dataset's
	// expected answers with a known accuracy.
	AnswerKey *AnswerKeyFile `json:"answerKey,omitempty"`
	// Script is the agent script file (LoadScript's format): what each
	// agent answers at each step. Empty means no script.
	Script string `json:"script,omitempty"`
	// Analyzer is the analysis of the provider's embeddings
	// (Config.Analyzer). It is not in the IR: lowering sets it to
	// runtime/analysis's English when one of the provider's models embeds,
	// so that a generated service links the stemmer only then.
	Analyzer Analyzer `json:"-"`
}

// AnswerKeyFile is an answer key read from an eval dataset.
type AnswerKeyFile struct {
	// Dataset is the eval dataset (dataset.Load's format) holding the
	// expected answers.
	Dataset string `json:"dataset"`
	// Accuracy is the probability of a correct answer, in [0, 1].
	Accuracy float64 `json:"accuracy"`
}

// ProviderKind implements gateway.ProviderKind.
func (Kind) ProviderKind() string { return kind.ProviderFake }

// RetryPolicy implements gateway.ProviderKind: a single attempt, since the
// fake never fails transiently and a scripted error is meant to be seen,
// not retried away.
func (Kind) RetryPolicy() gateway.RetryPolicy { return gateway.RetryPolicy{MaxAttempts: 1} }

// NewProvider implements gateway.ProviderKind: it reads the answer key's
// dataset and the script from the application's files, and draws with
// env.Seed instead of Seed when that is set.
func (k Kind) NewProvider(_ context.Context, env kind.Env) (gateway.Provider, error) {
	seed := k.Seed
	if env.Seed != nil {
		seed = *env.Seed
	}
	cfg := Config{Seed: uint64(seed), Latency: k.Latency, Analyzer: k.Analyzer}
	var errs []error
	if ak := k.AnswerKey; ak != nil {
		ds, err := dataset.Read(env.Files, ak.Dataset)
		if err != nil {
			errs = append(errs, fmt.Errorf("loading the answer key: %w", err))
		} else {
			key := &AnswerKey{Accuracy: ak.Accuracy}
			for _, c := range ds.Cases {
				key.Cases = append(key.Cases, Case{ID: c.ID, Input: c.Input, Answer: c.Expected})
			}
			cfg.AnswerKey = key
		}
	}
	if k.Script != "" {
		sc, err := ReadScript(env.Files, k.Script)
		if err != nil {
			errs = append(errs, fmt.Errorf("loading the agent script: %w", err))
		} else {
			cfg.Agents, cfg.Conversations = sc.Agents, sc.Conversations
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return New(cfg)
}
