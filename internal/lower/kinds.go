package lower

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/fixture"
	toolhttp "github.com/aidgen/aid/runtime/agents/tools/http"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/agents/tools/sandbox"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/anthropic"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// The kinds lowering builds, by extension point: each built kind's name
// (kind.Names) and the zero value of its typed configuration, which an
// IR block of the kind decodes into. This is the one table on the IR's
// side of aid that imports the kind packages; a test holds its keys equal
// to runtime/kind's lists.
var (
	// ProviderKinds are the provider kinds.
	ProviderKinds = map[string]gateway.ProviderKind{
		kind.ProviderAnthropic:        anthropic.Kind{},
		kind.ProviderFake:             fake.Kind{},
		kind.ProviderOpenAICompatible: openaicompat.Kind{},
	}
	// StoreKinds are the store kinds.
	StoreKinds = map[string]retrieval.StoreKind{
		kind.StoreMemory:   memory.Kind{},
		kind.StorePGVector: pgvector.Kind{},
	}
	// ToolKinds are the tool kinds; ToolGo has no configuration.
	ToolKinds = map[string]agents.ToolKind{
		kind.ToolGo:      nil,
		kind.ToolHTTP:    toolhttp.Kind{},
		kind.ToolFixture: fixture.Kind{},
		kind.ToolMCP:     mcp.Kind{},
		kind.ToolSandbox: sandbox.Kind{},
	}
	// ResourceKinds are the resource kinds, by the name of their section.
	ResourceKinds = map[string]kind.ResourceKind{
		kind.ResourceMCPServers: mcp.Server{},
	}
)

// storeFields are the fields of a store's block that every store has,
// whatever its kind, and that retrieval.StoreConfig holds.
var storeFields = []string{"distance"}

// Decode decodes the block cfg of an element of the named kind of extension
// point p into the kind's typed configuration, as Document does: the
// configuration, nil for a kind without one (go tools), or the error
// Document reports, a *kind.DeferredError for a deferred kind.
func Decode(p kind.Point, name string, cfg ir.Config) (any, error) {
	switch p {
	case kind.Providers:
		return decodeKind(ProviderKinds, p, name, cfg)
	case kind.Tools:
		return decodeKind(ToolKinds, p, name, cfg)
	case kind.Stores:
		return decodeKind(StoreKinds, p, name, cfg, storeFields...)
	case kind.Resources:
		return decodeKind(ResourceKinds, p, name, cfg)
	}
	return nil, fmt.Errorf("unknown extension point %q", p)
}

// decodeKind decodes the block cfg of an element of the named kind of
// extension point p into the kind's typed configuration, the zero value of
// which table holds under the name; common are the block's fields that the
// element has whatever its kind, which the description holds apart. A kind
// the runtime defers is a *kind.DeferredError; one it does not know, an
// error naming the known ones.
func decodeKind[T any](table map[string]T, p kind.Point, name string, cfg ir.Config, common ...string) (T, error) {
	var zero T
	proto, ok := table[name]
	if !ok {
		if kind.IsDeferred(p, name) {
			return zero, &kind.DeferredError{Feature: fmt.Sprintf("%s kind %q", p, name)}
		}
		return zero, fmt.Errorf("unknown %s kind %q; known kinds: %s", p, name, strings.Join(kind.Names(p), ", "))
	}
	rt := reflect.TypeOf(proto)
	if rt == nil {
		return zero, nil // a kind without configuration
	}
	dst := reflect.New(rt)
	if err := decodeConfig(cfg, dst.Interface(), rt, common); err != nil {
		return zero, fmt.Errorf("%s kind %q: %w", p, name, err)
	}
	return dst.Elem().Interface().(T), nil
}

// decodeConfig decodes the JSON block data into dst, a pointer to a value
// of type rt, leaving out the block's kind and common fields. Every other
// field must be one of rt's: a field the schema allows that the kind's
// configuration lacks would otherwise be lost without a word. Durations
// are the IR's Go duration strings.
func decodeConfig(data []byte, dst any, rt reflect.Type, common []string) error {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("decoding the block: %w", err)
	}
	delete(fields, "kind")
	for _, f := range common {
		delete(fields, f)
	}
	v, err := durations(fields, rt)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec = json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

var durationType = reflect.TypeFor[time.Duration]()

// durations returns the decoded JSON value v with every duration string
// where rt has a time.Duration replaced by its nanoseconds, which is how
// encoding/json reads a time.Duration.
func durations(v any, rt reflect.Type) (any, error) {
	if rt == durationType {
		s, ok := v.(string)
		if !ok {
			return v, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, err
		}
		return json.Number(fmt.Sprint(int64(d))), nil
	}
	switch rt.Kind() {
	case reflect.Pointer:
		return durations(v, rt.Elem())
	case reflect.Slice, reflect.Array:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				var err error
				if list[i], err = durations(e, rt.Elem()); err != nil {
					return nil, err
				}
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				var err error
				if m[k], err = durations(e, rt.Elem()); err != nil {
					return nil, err
				}
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if e, ok := m[name]; ok && name != "" && name != "-" {
				var err error
				if m[name], err = durations(e, f.Type); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	}
	return v, nil
}
