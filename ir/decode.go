package ir

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cuelang.org/go/cue"
)

// decodeValue decodes a validated, concrete CUE value into the Go value
// pointed to by dst, following the json tags of the IR types.
//
// It does what cue.Value.Decode does for the shapes the IR uses, but looks
// struct fields up by name instead of iterating them: iterating a struct
// orders its fields topologically, which dominates decoding time on large
// files. Only maps (the IR's sections) are iterated.
func decodeValue(v cue.Value, dst any) error {
	return decodeInto(v, reflect.ValueOf(dst).Elem(), false)
}

// decodeLenient decodes what it can of a value that failed validation: a
// field or list element that does not decode is left at its zero value.
// The loader uses it so the semantic passes still see the rest of an entry;
// problems on the skipped paths are CUE's to report, and the loader drops
// semantic errors on them.
func decodeLenient(v cue.Value, dst any) {
	_ = decodeInto(v, reflect.ValueOf(dst).Elem(), true)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	durationType   = reflect.TypeFor[Duration]()
)

func decodeInto(v cue.Value, rv reflect.Value, lenient bool) error {
	if d, ok := v.Default(); ok {
		v = d
	}
	switch rv.Type() {
	case rawMessageType:
		b, err := v.MarshalJSON()
		if err != nil {
			return err
		}
		rv.SetBytes(b)
		return nil
	case durationType:
		s, err := v.String()
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		rv.SetInt(int64(d))
		return nil
	}
	switch rv.Kind() {
	case reflect.String:
		s, err := v.String()
		if err != nil {
			return err
		}
		rv.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := v.Int64()
		if err != nil {
			return err
		}
		rv.SetInt(n)
	case reflect.Float64:
		f, err := v.Float64()
		if err != nil {
			return err
		}
		rv.SetFloat(f)
	case reflect.Bool:
		b, err := v.Bool()
		if err != nil {
			return err
		}
		rv.SetBool(b)
	case reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		if err := decodeInto(v, p.Elem(), lenient); err != nil {
			return err
		}
		rv.Set(p)
	case reflect.Slice:
		it, err := v.List()
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(rv.Type(), 0, 4)
		for it.Next() {
			e := reflect.New(rv.Type().Elem()).Elem()
			if err := decodeInto(it.Value(), e, lenient); err != nil && !lenient {
				return err
			}
			s = reflect.Append(s, e)
		}
		rv.Set(s)
	case reflect.Map:
		it, err := v.Fields()
		if err != nil {
			return err
		}
		m := reflect.MakeMap(rv.Type())
		for it.Next() {
			e := reflect.New(rv.Type().Elem()).Elem()
			if err := decodeInto(it.Value(), e, lenient); err != nil && !lenient {
				return fmt.Errorf("%s: %w", it.Selector().Unquoted(), err)
			}
			m.SetMapIndex(reflect.ValueOf(it.Selector().Unquoted()), e)
		}
		rv.Set(m)
	case reflect.Struct:
		t := rv.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			fv := v.LookupPath(cue.MakePath(cue.Str(name)))
			if !fv.Exists() {
				continue
			}
			if err := decodeInto(fv, rv.Field(i), lenient); err != nil {
				if lenient {
					rv.Field(i).SetZero()
					continue
				}
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	default:
		return fmt.Errorf("cannot decode into %s", rv.Type())
	}
	return nil
}
