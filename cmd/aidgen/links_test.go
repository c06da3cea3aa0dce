package main

import (
	"regexp"
	"slices"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// sdkService matches a method of a service type of the provider SDKs
// (openai-go, anthropic-sdk-go), capturing the service.
var sdkService = regexp.MustCompile(`^github\.com/(?:openai/openai-go/v3|anthropics/anthropic-sdk-go/v2)(?:/[a-z]+)?\.\(\*?([A-Za-z]+Service)\)\.`)

// TestAidgenLinksOnlyTheSDKServicesItCalls guards the cut that took aidgen
// from 141 MB to 101 MB (issue 36): the providers hold the services they
// call, never an SDK's whole client. CUE links text/template, whose
// reflective method calls make the linker keep every exported method of
// every type a kept value reaches; a held client reaches every service of
// the API (batches, realtime, fine-tuning, beta...) and with them 40 MB of
// code no provider calls. scripts/binsize.sh prints the figures.
func TestAidgenLinksOnlyTheSDKServicesItCalls(t *testing.T) {
	_, syms := depcheck.Link(t, "github.com/aidgen/aid/cmd/aidgen")
	allowed := []string{
		"ChatCompletionService", "ChatCompletionMessageService", "EmbeddingService", // openaicompat
		"ResponseService", "InputItemService", "InputTokenService", // openaicompat's models with api "responses", and the services ResponseService holds
		"MessageService", "MessageBatchService", // anthropic
	}
	var extra []string
	for _, s := range syms {
		m := sdkService.FindStringSubmatch(s.Name)
		if m != nil && !slices.Contains(allowed, m[1]) && !slices.Contains(extra, m[1]) {
			extra = append(extra, m[1])
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("aidgen links the methods of %d SDK services no provider calls (does a provider hold a whole client?): %v", len(extra), extra)
	}
}
