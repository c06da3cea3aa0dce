package rules

import "fmt"

// StoreWrite is what one retriever writes into its store: vectors of one
// width, from one embedding model.
type StoreWrite struct {
	// Retriever names the retriever.
	Retriever string
	// Store names the store it writes into.
	Store string
	// Model names the embedding model, as the caller knows it (the pinned
	// model id at vet time, the alias at assembly).
	Model string
	// Width is the width of the model's vectors.
	Width int
}

// StoreWidths holds the rule that a store holds vectors of one width, for
// vet (ir) and for assembly (retrieval.Build) alike: the first write into a
// store, in the order given, sets its width, and a later write of another
// width is refused. It returns each store's width and, by index into
// writes, what is wrong with each refused write and what to change.
func StoreWidths(writes []StoreWrite) (widths map[string]int, refused map[int]string) {
	widths = make(map[string]int)
	first := make(map[string]StoreWrite)
	for i, w := range writes {
		f, ok := first[w.Store]
		if !ok {
			first[w.Store], widths[w.Store] = w, w.Width
			continue
		}
		if f.Width != w.Width {
			if refused == nil {
				refused = make(map[int]string)
			}
			refused[i] = fmt.Sprintf("retriever %q writes %d-wide vectors (model %q) into store %q, where retriever %q writes %d-wide ones (model %q); a store holds one width: embed with a model of width %d, or give this retriever its own store", w.Retriever, w.Width, w.Model, w.Store, f.Retriever, f.Width, f.Model, f.Width)
		}
	}
	return widths, refused
}
