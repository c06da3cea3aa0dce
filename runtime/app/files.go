package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"

	"github.com/aidgen/aid/runtime/kind"
)

// ReadFiles reads, through files, every file the application reads when it
// serves: the files its kinds' configurations name (kind.Info.Files: agent
// scripts, answer keys, fixtures) and the documents its retrievers ingest,
// the folders of its skills,
// by the names the description gives them (slash-separated, relative to
// its directory). aidgen build embeds them in a generated service, so that
// the service runs from any directory. Eval datasets and baselines are not
// among them, unless a kind names one: a service runs no eval.
func (d Description) ReadFiles(files kind.Files) (map[string][]byte, error) {
	var names []string
	add := func(p kind.Point, name string, config any) error {
		info, _ := kind.Lookup(p, name)
		if len(info.Files) == 0 {
			return nil
		}
		b, err := json.Marshal(config)
		if err != nil {
			return fmt.Errorf("reading the %s kind %q's configuration: %w", p, name, err)
		}
		for _, f := range info.Files {
			if s, ok := kind.Field(b, f); ok && s != "" {
				names = append(names, s)
			}
		}
		return nil
	}
	var errs []error
	for _, p := range d.Providers {
		if p.Kind != nil {
			errs = append(errs, add(kind.Providers, p.Kind.ProviderKind(), p.Kind))
		}
	}
	for _, t := range d.Tools {
		if t.Kind != nil {
			errs = append(errs, add(kind.Tools, t.Kind.ToolKind(), t.Kind))
		}
	}
	for _, s := range d.Stores {
		if s.Kind != nil {
			errs = append(errs, add(kind.Stores, s.Kind.StoreKind(), s.Kind))
		}
	}
	for _, r := range d.Resources {
		if r.Kind != nil {
			errs = append(errs, add(kind.Resources, r.Kind.ResourceKind(), r.Kind))
		}
	}
	for _, r := range d.Retrievers {
		matched, err := r.Source.Names(files)
		if err != nil {
			errs = append(errs, fmt.Errorf("retriever %q: %w", r.Name, err))
			continue
		}
		for _, m := range matched {
			names = append(names, path.Join(filepath.ToSlash(r.Source.Dir), m))
		}
	}
	names = append(names, d.skillFiles()...)
	out := map[string][]byte{}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		b, err := files.ReadFile(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", files.Name(name), err))
			continue
		}
		out[path.Clean(filepath.ToSlash(name))] = b
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
