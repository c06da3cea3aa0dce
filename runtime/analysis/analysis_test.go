package analysis

import (
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Refunds are REFUNDED when refunding", []string{"refund", "refund", "refund"}},
		{"The parcel's tracking-link (v2) costs $3.50", []string{"parcel", "track", "link", "v2", "cost", "3.50"}},
		{"Café naïve ÜBER", []string{"café", "naïv", "über"}},
		{"日本語のテキスト", []string{"日", "本", "語", "の", "テキスト"}}, // UAX #29: one ideograph per word
		{"... --- !!!", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := Terms(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("Terms(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestWordsKeepStopWords(t *testing.T) {
	var got []string
	Words("How is THE order", func(w string) { got = append(got, w) })
	if want := []string{"how", "is", "the", "order"}; !slices.Equal(got, want) {
		t.Errorf("Words = %q, want %q", got, want)
	}
}

func TestStopWords(t *testing.T) {
	for _, w := range []string{"the", "my", "your", "how", "is"} {
		if !IsStopWord(w) {
			t.Errorf("%q is not a stop word", w)
		}
	}
	if IsStopWord("refund") || IsStopWord("lock") {
		t.Error("IsStopWord drops a content word")
	}
}
