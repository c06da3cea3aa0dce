package ir

import (
	"encoding/json"
	"errors"
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
	return (&decoder{}).into(v, reflect.ValueOf(dst).Elem())
}

// decodeLenient decodes what it can of a value that failed validation: a
// field or list element that does not decode is left at its zero value.
// The loader uses it so the semantic passes still see the rest of an entry;
// problems on the skipped paths are CUE's to report, and the loader drops
// semantic errors on them. It returns the numbers that the schema accepts
// but Go cannot hold, each to be reported at its place.
func decodeLenient(v cue.Value, dst any) []*numberError {
	d := &decoder{lenient: true}
	_ = d.into(v, reflect.ValueOf(dst).Elem())
	return d.numbers
}

// decoder is the state of one decode.
type decoder struct {
	lenient bool
	numbers []*numberError // collected in lenient mode
}

// numberError is a number the schema accepts, because CUE compares exact
// decimals, but a 64-bit Go value cannot hold: 1e-400 as a float64 is 0,
// and 1e30 is no int64. It is the user's to fix, at the number.
type numberError struct {
	path cue.Path
	msg  string
}

func (e *numberError) Error() string { return e.msg }

// number reports a number conversion that failed because the value is out
// of the Go type's range; any other error is returned as is.
func (d *decoder) number(v cue.Value, err error, float bool) error {
	if !errors.Is(err, cue.ErrBelow) && !errors.Is(err, cue.ErrAbove) {
		return err
	}
	msg := fmt.Sprintf("invalid value %v: too large for the 64-bit integer the runtime holds it in", v)
	if float {
		if f, _ := v.Float64(); f == 0 {
			msg = fmt.Sprintf("invalid value %v: too close to 0 for a 64-bit float, which would hold it as 0; write a larger number, or 0 where 0 is allowed", v)
		} else {
			msg = fmt.Sprintf("invalid value %v: too large for the 64-bit float the runtime holds it in", v)
		}
	}
	ne := &numberError{path: v.Path(), msg: msg}
	d.numbers = append(d.numbers, ne)
	return ne
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	durationType   = reflect.TypeFor[Duration]()
)

func (d *decoder) into(v cue.Value, rv reflect.Value) error {
	if def, ok := v.Default(); ok {
		v = def
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
			return d.number(v, err, false)
		}
		rv.SetInt(n)
	case reflect.Float64:
		f, err := v.Float64()
		if err != nil {
			return d.number(v, err, true)
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
		if err := d.into(v, p.Elem()); err != nil {
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
			if err := d.into(it.Value(), e); err != nil && !d.lenient {
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
			if err := d.into(it.Value(), e); err != nil && !d.lenient {
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
			if err := d.into(fv, rv.Field(i)); err != nil {
				if d.lenient {
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

// numberErr reports a number Go cannot hold at the number, unless CUE
// already reported a problem there, and keeps the semantic checks off it:
// the decoded zero in its place is not what the user wrote.
func (l *loader) numberErr(ne *numberError) {
	sels := ne.path.Selectors()
	if len(sels) > 0 && sels[0].IsDefinition() {
		sels = sels[1:] // #App
	}
	p := cue.MakePath(sels...)
	l.errAt(p, "%s", ne.msg)
	l.cuePaths[p.String()] = true
}
