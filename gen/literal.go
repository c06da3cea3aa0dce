package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
)

var (
	durationType = reflect.TypeFor[time.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

// Literal returns Go source for a composite literal that evaluates to a
// value deeply equal to v: structs with their package-qualified type, zero
// fields left out, maps in sorted key order, a json.RawMessage as a
// conversion of its exact bytes, a time.Duration as a constant expression,
// a pointer to a basic value as new(T(v)), and a value held in an interface
// as that value with its own package-qualified type (fake.Kind{...}), so
// that a description holding a kind's configuration in an interface field
// imports exactly that kind's package. It is how the generator bakes an
// application description into a service, and it refuses, naming the path,
// whatever a literal cannot hold (funcs, channels, unexported fields, NaN),
// so that a description that stops being plain data fails the build rather
// than losing a field.
func Literal(v any) (jen.Code, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return nil, fmt.Errorf("literal of a nil interface")
	}
	return literal(rv, rv.Type().String())
}

// literal renders rv; path names it in errors.
func literal(rv reflect.Value, path string) (*jen.Statement, error) {
	rt := rv.Type()
	if rt == durationType {
		return durationLit(time.Duration(rv.Int())), nil
	}
	if rt == rawType {
		if rv.IsNil() {
			return jen.Nil(), nil
		}
		// JSON rarely holds a backquote: a raw string keeps it readable.
		s := string(rv.Bytes())
		if rawable(s) {
			return jen.Qual("encoding/json", "RawMessage").Call(jen.Op("`" + s + "`")), nil
		}
		return jen.Qual("encoding/json", "RawMessage").Call(jen.Lit(s)), nil
	}
	switch rt.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return basicLit(rv, path)
	case reflect.Pointer:
		if rv.IsNil() {
			return jen.Nil(), nil
		}
		elem := rv.Elem()
		if elem.Kind() == reflect.Struct {
			inner, err := literal(elem, path)
			if err != nil {
				return nil, err
			}
			return jen.Op("&").Add(inner), nil
		}
		inner, err := literal(elem, "*"+path)
		if err != nil {
			return nil, err
		}
		// new(T(v)) (Go 1.26) takes the address of a value without a
		// helper; the conversion keeps T when v is an untyped constant.
		t, err := typeCode(elem.Type(), path)
		if err != nil {
			return nil, err
		}
		switch elem.Kind() {
		case reflect.Slice, reflect.Map, reflect.Array, reflect.Pointer:
			if elem.Kind() == reflect.Pointer || (elem.Kind() != reflect.Array && elem.IsNil()) {
				return nil, fmt.Errorf("%s points to a nil or a pointer, which the generator does not spell", path)
			}
			return jen.Id("new").Call(inner), nil // already typed
		}
		if elem.Type() == durationType && elem.Int() != 0 {
			return jen.Id("new").Call(inner), nil // n * time.Unit is typed
		}
		return jen.Id("new").Call(t.Call(inner)), nil
	case reflect.Slice, reflect.Array:
		t, err := typeCode(rt, path)
		if err != nil {
			return nil, err
		}
		if rt.Kind() == reflect.Slice && rv.IsNil() {
			return jen.Nil(), nil
		}
		items := make([]jen.Code, 0, rv.Len())
		for i := range rv.Len() {
			item, err := elemLit(rv.Index(i), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			items = append(items, item)
		}
		return t.Add(block(items)), nil
	case reflect.Map:
		t, err := typeCode(rt, path)
		if err != nil {
			return nil, err
		}
		if rv.IsNil() {
			return jen.Nil(), nil
		}
		type entry struct {
			sortKey  string
			key, val jen.Code
		}
		var entries []entry
		iter := rv.MapRange()
		for iter.Next() {
			k, err := literal(iter.Key(), path+"{key}")
			if err != nil {
				return nil, err
			}
			sortKey := fmt.Sprintf("%#v", k)
			v, err := elemLit(iter.Value(), fmt.Sprintf("%s[%s]", path, sortKey))
			if err != nil {
				return nil, err
			}
			entries = append(entries, entry{sortKey, k, v})
		}
		// Go randomises map iteration; the rendered key orders entries so
		// that the same map is always the same bytes.
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.sortKey, b.sortKey) })
		items := make([]jen.Code, 0, len(entries))
		for _, e := range entries {
			items = append(items, jen.Add(e.key).Op(":").Add(e.val))
		}
		return t.Add(block(items)), nil
	case reflect.Struct:
		body, err := structBody(rv, path)
		if err != nil {
			return nil, err
		}
		t, err := typeCode(rt, path)
		if err != nil {
			return nil, err
		}
		return t.Add(body), nil
	case reflect.Interface:
		if rv.IsNil() {
			return jen.Nil(), nil
		}
		return typedLit(rv.Elem(), path)
	default:
		return nil, fmt.Errorf("%s is a %s, which a Go literal cannot hold as data", path, rt.Kind())
	}
}

// typedLit renders rv so that the expression has rv's own type, not the
// default type of an untyped constant: what an interface holds keeps its
// dynamic type only when the literal spells it.
func typedLit(rv reflect.Value, path string) (*jen.Statement, error) {
	lit, err := literal(rv, path)
	if err != nil {
		return nil, err
	}
	switch rv.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if rv.Type() == durationType && rv.Int() != 0 {
			return lit, nil // n * time.Unit is typed
		}
		t, err := typeCode(rv.Type(), path)
		if err != nil {
			return nil, err
		}
		return t.Call(lit), nil
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if rv.IsNil() {
			t, err := typeCode(rv.Type(), path)
			if err != nil {
				return nil, err
			}
			return jen.Parens(t).Call(jen.Nil()), nil
		}
	}
	return lit, nil // composite literals and conversions are typed
}

// elemLit renders an element of a slice, array or map: a struct, or a
// pointer to one, leaves its type out, as gofmt -s would.
func elemLit(rv reflect.Value, path string) (*jen.Statement, error) {
	switch {
	case rv.Kind() == reflect.Struct:
		return structBody(rv, path)
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct:
		return structBody(rv.Elem(), path)
	}
	return literal(rv, path)
}

// structBody renders a struct's non-zero fields, in declaration order, in
// braces without the type's name. A zero field is left out: the literal
// means the same without it.
func structBody(rv reflect.Value, path string) (*jen.Statement, error) {
	rt := rv.Type()
	var items []jen.Code
	for i := range rt.NumField() {
		f := rt.Field(i)
		fv := rv.Field(i)
		if fv.IsZero() {
			continue
		}
		if !f.IsExported() {
			return nil, fmt.Errorf("%s.%s is unexported: a literal outside its package cannot set it", path, f.Name)
		}
		v, err := literal(fv, path+"."+f.Name)
		if err != nil {
			return nil, err
		}
		items = append(items, jen.Id(f.Name).Op(":").Add(v))
	}
	return block(items), nil
}

// block renders items one per line in braces, the way a person lays out a
// configuration literal; an empty block stays {}.
func block(items []jen.Code) *jen.Statement {
	if len(items) == 0 {
		return jen.Values()
	}
	return jen.Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, items...)
}

// basicLit renders a boolean, string or number as an untyped constant,
// which a field, an element or a conversion gives its type.
func basicLit(rv reflect.Value, path string) (*jen.Statement, error) {
	switch rv.Kind() {
	case reflect.Bool:
		return jen.Lit(rv.Bool()), nil
	case reflect.String:
		return stringLit(rv.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return jen.Op(strconv.FormatInt(rv.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return jen.Op(strconv.FormatUint(rv.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s is %v, which a Go constant cannot spell", path, f)
		}
		bits := 64
		if rv.Kind() == reflect.Float32 {
			bits = 32
		}
		// The shortest representation that parses back to the same bits.
		return jen.Op(strconv.FormatFloat(f, 'g', -1, bits)), nil
	}
	return nil, fmt.Errorf("%s is a %s, not a basic value", path, rv.Kind())
}

// stringLit renders s as a raw string when it spans lines and a raw string
// can hold it exactly (instructions and schemas stay readable), and as an
// interpreted string otherwise.
func stringLit(s string) *jen.Statement {
	if strings.Contains(s, "\n") && rawable(s) {
		return jen.Op("`" + s + "`")
	}
	return jen.Lit(s)
}

// rawable reports whether a raw string literal holds s unchanged: no
// backquote, no carriage return (the compiler drops it from raw strings),
// valid UTF-8, no BOM and no control character but tab and newline.
func rawable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == '`', r == '\r', r == '\uFEFF':
			return false
		case r < ' ' && r != '\t' && r != '\n', r == 0x7f:
			return false
		}
	}
	return true
}

// durationLit spells d in the largest unit that divides it, such as
// 30 * time.Second.
func durationLit(d time.Duration) *jen.Statement {
	units := []struct {
		name string
		d    time.Duration
	}{{"Hour", time.Hour}, {"Minute", time.Minute}, {"Second", time.Second}, {"Millisecond", time.Millisecond}, {"Microsecond", time.Microsecond}}
	if d == 0 {
		return jen.Lit(0)
	}
	for _, u := range units {
		if d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 {
				return jen.Qual("time", u.name)
			}
			return jen.Op(strconv.FormatInt(n, 10)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Op(strconv.FormatInt(int64(d), 10)))
}

// typeCode spells a type: a named type qualified by its package, the
// others by their structure.
func typeCode(rt reflect.Type, path string) (*jen.Statement, error) {
	if rt.Name() != "" {
		if rt.PkgPath() == "" {
			return jen.Id(rt.Name()), nil
		}
		if strings.ContainsAny(rt.Name(), "[]") {
			return nil, fmt.Errorf("%s has the generic type %s, which the generator does not spell", path, rt)
		}
		return jen.Qual(rt.PkgPath(), rt.Name()), nil
	}
	switch rt.Kind() {
	case reflect.Pointer:
		e, err := typeCode(rt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return jen.Op("*").Add(e), nil
	case reflect.Slice:
		e, err := typeCode(rt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return jen.Index().Add(e), nil
	case reflect.Array:
		e, err := typeCode(rt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return jen.Index(jen.Lit(rt.Len())).Add(e), nil
	case reflect.Struct:
		fields := make([]jen.Code, 0, rt.NumField())
		for i := range rt.NumField() {
			f := rt.Field(i)
			ft, err := typeCode(f.Type, path+"."+f.Name)
			if err != nil {
				return nil, err
			}
			if f.Tag != "" {
				ft = ft.Op("`" + string(f.Tag) + "`")
			}
			fields = append(fields, jen.Id(f.Name).Add(ft))
		}
		return jen.Struct(fields...), nil
	case reflect.Map:
		k, err := typeCode(rt.Key(), path)
		if err != nil {
			return nil, err
		}
		e, err := typeCode(rt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return jen.Map(k).Add(e), nil
	case reflect.Interface:
		if rt.NumMethod() == 0 {
			return jen.Any(), nil
		}
	}
	return nil, fmt.Errorf("%s has the unnamed type %s, which the generator does not spell", path, rt)
}

// Spellable reports every place in the type rt where a value could hold
// what Literal refuses: a func, a channel, an unsafe pointer, an
// unexported field, or an interface other than kinds, the interfaces a
// kind's configuration implements (a description's Kind fields), whose
// values Literal spells with their own types; check each kind's type apart.
// A test holds the description and every kind's configuration to it, so
// that a field that stops being plain data fails a test, not a build.
func Spellable(rt reflect.Type, kinds ...reflect.Type) error {
	var errs []error
	seen := map[reflect.Type]bool{}
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		if seen[rt] || slices.Contains(kinds, rt) {
			return
		}
		seen[rt] = true
		switch rt.Kind() {
		case reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer, reflect.Uintptr:
			errs = append(errs, fmt.Errorf("%s is a %s, which a Go literal cannot hold as data", path, rt.Kind()))
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(rt.Elem(), path+"[]")
		case reflect.Map:
			walk(rt.Key(), path+"{key}")
			walk(rt.Elem(), path+"{}")
		case reflect.Struct:
			for i := range rt.NumField() {
				f := rt.Field(i)
				if !f.IsExported() {
					errs = append(errs, fmt.Errorf("%s.%s is unexported, which a literal outside the package cannot set", path, f.Name))
				}
				walk(f.Type, path+"."+f.Name)
			}
		}
	}
	walk(rt, rt.String())
	return errors.Join(errs...)
}
