package service

import (
	"encoding/json"
	"testing"
)

// FuzzContentString checks that a message's string content reads as
// encoding/json reads the string, escapes, invalid UTF-8 and all, whether
// it takes the copy of an unescaped string or the decoder.
func FuzzContentString(f *testing.F) {
	for _, s := range []string{"", "Paris", `a\"b`, `line\nnext`, `\u00e9t\u00e9`, "été", "\xff\xfe", `\ud83d\ude00`, "tab\there", `\\`, "😀", `\ud800`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, inner string) {
		raw := []byte(`"` + inner + `"`)
		var want string
		if json.Unmarshal(raw, &want) != nil {
			return // not a JSON string: the decoder never hands it over
		}
		var c wireContent
		if err := c.UnmarshalJSON(raw); err != nil || !c.set || c.refused != "" {
			t.Fatalf("%q: err %v, set %v, refused %q", raw, err, c.set, c.refused)
		}
		if c.text != want {
			t.Fatalf("%q reads %q, encoding/json %q", raw, c.text, want)
		}
	})
}
