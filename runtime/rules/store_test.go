package rules_test

import (
	"maps"
	"testing"

	"github.com/aidgen/aid/runtime/rules"
)

// TestStoreWidths checks the one-width rule: the first write sets a
// store's width, a later write of the same width shares it, one of another
// width is refused naming both retrievers, and other stores are apart.
func TestStoreWidths(t *testing.T) {
	widths, refused := rules.StoreWidths([]rules.StoreWrite{
		{Retriever: "docs", Store: "kb", Model: "embed", Width: 64},
		{Retriever: "faq", Store: "kb", Model: "wide", Width: 128},
		{Retriever: "more", Store: "kb", Model: "embed", Width: 64},
		{Retriever: "other", Store: "side", Model: "wide", Width: 128},
	})
	if want := map[string]int{"kb": 64, "side": 128}; !maps.Equal(widths, want) {
		t.Errorf("widths %v, want %v", widths, want)
	}
	want := map[int]string{1: `retriever "faq" writes 128-wide vectors (model "wide") into store "kb", where retriever "docs" writes 64-wide ones (model "embed"); a store holds one width: embed with a model of width 64, or give this retriever its own store`}
	if !maps.Equal(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	if _, refused := rules.StoreWidths(nil); refused != nil {
		t.Errorf("no writes refused %v", refused)
	}
}
