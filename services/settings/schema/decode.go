package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Apply merges a decoded patch into stored values (which it does not
// modify): sections merge field by field, objects merge per key, arrays and
// scalars are replaced, null deletes the stored value (a null section
// deletes every stored value in it). base supplies the current effective
// value an object field merges into when nothing is stored; live is true for
// a PATCH (see Field.Check). It returns the new stored values, the fields
// the patch changed and the problems of each field (a field with a problem
// keeps its previous value and does not count as changed).
func (s *Schema) Apply(stored, base Values, patch map[string]any, live bool) (Values, map[string]bool, map[string]string) {
	next := Values{}
	for k, v := range stored {
		next[k] = v
	}
	a := applier{s: s, next: next, base: base, live: live, touched: map[string]bool{}, errs: map[string]string{}}
	a.node(s.root, "", patch)
	return next, a.touched, a.errs
}

// Decode checks a whole JSON object against the schema, as a Record is
// decoded: it returns the values that passed and the problems, with
// Required fields that are absent or null reported.
func (s *Schema) Decode(obj map[string]any, live bool) (Values, map[string]string) {
	vals, _, errs := s.Apply(nil, nil, obj, live)
	for _, f := range s.fields {
		if f.Required == "" {
			continue
		}
		if _, ok := vals[f.Path]; ok || hasProblemAt(errs, f.Path) {
			continue
		}
		errs[f.Path] = f.Required
	}
	return vals, errs
}

func hasProblemAt(errs map[string]string, path string) bool {
	for k := range errs {
		if k == path || strings.HasPrefix(k, path+".") {
			return true
		}
	}
	return false
}

type applier struct {
	s       *Schema
	next    Values
	base    Values
	live    bool
	touched map[string]bool
	errs    map[string]string
}

func (a *applier) node(n *node, prefix string, obj map[string]any) {
	for _, k := range SortedKeys(obj) {
		v := obj[k]
		path := Join(prefix, k)
		child := n.children[k]
		switch {
		case child == nil:
			a.errs[path] = "unknown field"
		case child.field == nil && v == nil:
			a.deleteSection(path)
		case child.field == nil:
			m, ok := v.(map[string]any)
			if !ok {
				a.errs[path] = "must be an object"
				continue
			}
			a.node(child, path, m)
		case v == nil:
			delete(a.next, path)
			a.touched[path] = true
		default:
			a.leaf(child.field, path, v)
		}
	}
}

func (a *applier) deleteSection(path string) {
	for _, f := range a.s.fields {
		if strings.HasPrefix(f.Path, path+".") {
			delete(a.next, f.Path)
			a.touched[f.Path] = true
		}
	}
}

func (a *applier) leaf(f *Field, path string, v any) {
	var val any
	var problems map[string]string
	if f.Kind == Object {
		val, problems = a.mergeObject(f, path, v)
	} else {
		val, problems = decodeValue(f, v, a.live)
	}
	if len(problems) > 0 {
		for suffix, msg := range problems {
			a.errs[path+suffix] = msg
		}
		return
	}
	a.next[path] = val
	a.touched[path] = true
}

// mergeObject merges an Object patch into the stored (or else the
// effective) value and checks the result.
func (a *applier) mergeObject(f *Field, path string, v any) (any, map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, f.problem("must be an object")
	}
	cur, ok := a.next[path].(map[string]any)
	if !ok {
		cur, _ = a.base[path].(map[string]any)
	}
	merged, _ := clone(cur).(map[string]any)
	if merged == nil {
		merged = map[string]any{}
	}
	mergeObject(merged, Plain(m).(map[string]any))
	if f.Check != nil {
		return f.Check(merged, a.live)
	}
	return merged, nil
}

// problem is a one-problem answer in the field's own words when it has them.
func (f *Field) problem(msg string) map[string]string {
	if f.Problem != "" {
		msg = f.Problem
	}
	return map[string]string{"": msg}
}

// decodeValue checks a patch value against its field.
func decodeValue(f *Field, v any, live bool) (any, map[string]string) {
	switch f.Kind {
	case Record:
		return decodeRecord(f, v, live)
	case Records:
		return decodeRecords(f, v, live)
	}
	val, problems := decodeKind(f, v)
	if len(problems) > 0 {
		if f.Problem != "" {
			return nil, f.problem("")
		}
		return nil, problems
	}
	if f.Check != nil {
		return f.Check(val, live)
	}
	return val, nil
}

// decodeKind checks a value against the field's kind, range and items.
func decodeKind(f *Field, v any) (any, map[string]string) {
	one := func(msg string) (any, map[string]string) { return nil, map[string]string{"": msg} }
	switch f.Kind {
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return one("must be true or false")
		}
		return b, nil
	case Int:
		n, msg := intValue(v, f.Min, f.Max)
		if msg != "" {
			return one(msg)
		}
		return n, nil
	case Float:
		x, msg := floatValue(v, f.MinFloat, f.MaxFloat)
		if msg != "" {
			return one(msg)
		}
		return x, nil
	case String:
		str, msg := stringValue(f, v)
		if msg != "" {
			return one(msg)
		}
		return str, nil
	case IntList, FloatList, StringList:
		return decodeList(f, v)
	case JSON:
		return Plain(v), nil
	}
	return one("cannot be set")
}

func decodeList(f *Field, v any) (any, map[string]string) {
	arr, ok := v.([]any)
	if !ok {
		return nil, map[string]string{"": "must be an array"}
	}
	if msg := checkItems(f, len(arr)); msg != "" {
		return nil, map[string]string{"": msg}
	}
	problems := map[string]string{}
	ints, floats, strs := make([]int64, 0, len(arr)), make([]float64, 0, len(arr)), make([]string, 0, len(arr))
	for i, item := range arr {
		var msg string
		switch f.Kind {
		case IntList:
			var n int64
			n, msg = intValue(item, f.Min, f.Max)
			ints = append(ints, n)
		case FloatList:
			var x float64
			x, msg = floatValue(item, f.MinFloat, f.MaxFloat)
			floats = append(floats, x)
		default:
			var s string
			s, msg = stringValue(f, item)
			strs = append(strs, s)
		}
		if msg != "" {
			problems["."+strconv.Itoa(i)] = msg
		}
	}
	switch {
	case len(problems) > 0:
		return nil, problems
	case f.Kind == IntList:
		return ints, nil
	case f.Kind == FloatList:
		return floats, nil
	}
	return strs, nil
}

// decodeRecord checks an object against the field's Item schema.
func decodeRecord(f *Field, v any, live bool) (any, map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, f.problem("must be an object")
	}
	vals, errs := f.Item.Decode(m, live)
	problems := prefixed(errs, ".")
	if len(problems) == 0 && f.Check != nil {
		return f.Check(f.Item.Nest(vals), live)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return f.Item.Nest(vals), nil
}

// decodeRecords checks each item against the field's Item schema, then
// runs Check on the items as decoded (see Field.Check).
func decodeRecords(f *Field, v any, live bool) (any, map[string]string) {
	arr, ok := v.([]any)
	if !ok {
		return nil, f.problem("must be an array")
	}
	if msg := checkItems(f, len(arr)); msg != "" {
		return nil, f.problem(msg)
	}
	problems := map[string]string{}
	items := make([]any, len(arr))
	for i, item := range arr {
		p := "." + strconv.Itoa(i)
		m, ok := item.(map[string]any)
		if !ok {
			problems[p] = "must be an object"
			continue
		}
		vals, errs := f.Item.Decode(m, live)
		for k, msg := range prefixed(errs, p+".") {
			problems[k] = msg
		}
		items[i] = f.Item.Nest(vals)
	}
	var val any = items
	if f.Check != nil {
		var errs map[string]string
		val, errs = f.Check(items, live)
		for k, msg := range errs {
			if _, dup := problems[k]; !dup {
				problems[k] = msg
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return val, nil
}

func prefixed(errs map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(errs))
	for k, msg := range errs {
		out[prefix+k] = msg
	}
	return out
}

func checkItems(f *Field, n int) string {
	switch {
	case f.MinItems > 0 && f.MaxItems > 0 && (n < f.MinItems || n > f.MaxItems):
		return fmt.Sprintf("must have between %d and %d items", f.MinItems, f.MaxItems)
	case f.MaxItems > 0 && n > f.MaxItems:
		return fmt.Sprintf("must have at most %d items", f.MaxItems)
	case f.MinItems > 0 && n < f.MinItems:
		return fmt.Sprintf("must have at least %d items", f.MinItems)
	}
	return ""
}

// stringValue reads a string within the field's length and choices.
func stringValue(f *Field, v any) (string, string) {
	s, ok := v.(string)
	switch {
	case !ok:
		return "", "must be a string"
	case f.MaxLen > 0 && utf8.RuneCountInString(s) > f.MaxLen:
		return "", fmt.Sprintf("must be at most %d characters", f.MaxLen)
	case !f.oneOf(s):
		return "", "must be one of " + strings.Join(f.OneOf, ", ")
	}
	return s, ""
}

// intValue reads a JSON number as a whole number within [min, max].
func intValue(v any, min, max int64) (int64, string) {
	var lit string
	switch n := v.(type) {
	case json.Number:
		lit = n.String()
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return 0, "must be a whole number"
		}
		if n < float64(min) || n > float64(max) {
			return 0, rangeMsg(min, max)
		}
		return int64(n), ""
	case int64:
		if n < min || n > max {
			return 0, rangeMsg(min, max)
		}
		return n, ""
	default:
		return 0, "must be a whole number"
	}
	if strings.ContainsAny(lit, ".eE") {
		return 0, "must be a whole number"
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || n < min || n > max {
		return 0, rangeMsg(min, max)
	}
	return n, ""
}

// floatValue reads a JSON number within [min, max].
func floatValue(v any, min, max float64) (float64, string) {
	var x float64
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return 0, floatRangeMsg(min, max)
		}
		x = f
	case float64:
		x = n
	case int64:
		x = float64(n)
	default:
		return 0, floatRangeMsg(min, max)
	}
	if !(x >= min && x <= max) {
		return 0, floatRangeMsg(min, max)
	}
	return x, ""
}

func rangeMsg(min, max int64) string { return fmt.Sprintf("must be between %d and %d", min, max) }

func floatRangeMsg(min, max float64) string {
	return fmt.Sprintf("must be a number between %g and %g", min, max)
}
