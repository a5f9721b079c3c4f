package services

// Settings documents (40-admin-api §2, §2.5): one JSON object per settings
// key, stored sparsely (only explicitly set fields) with a revision, served
// as effective values (stored > env > default, 20-resilience §0). The engine
// below is shared by the resilience document (services/resilience) and the
// general document defined at the end of this file: a schema of typed leaf
// fields, strict PATCH decoding with dotted field paths, per-section merge,
// null deletes, cross-field rules on the merged result, If-Match revisions.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Errors of a settings PATCH that are not field problems. The HTTP layer maps
// them: ErrPreconditionFailed → 412 precondition_failed, ErrEmptySettingsPatch
// → 400 "no settings to update", *SettingsJSONError → 400 invalid_json.
var (
	ErrPreconditionFailed = errors.New("the settings changed since they were read; GET them again and retry with the new ETag")
	ErrEmptySettingsPatch = errors.New("no settings to update")
)

// SettingsJSONError says a PATCH body is not a JSON object.
type SettingsJSONError struct{ Detail string }

func (e *SettingsJSONError) Error() string { return "The body is not valid JSON: " + e.Detail }

// Sources of an effective settings value.
const (
	SourceDefault = "default"
	SourceEnv     = "env"
	SourceStored  = "stored"
	SourceDerived = "derived"
)

// SettingKind is the JSON type of a settings field.
type SettingKind int

const (
	SettingBool       SettingKind = iota + 1 // bool
	SettingInt                               // int64, Min–Max inclusive
	SettingString                            // string, at most MaxLen characters
	SettingIntList                           // []int64, MinItems–MaxItems items, each Min–Max
	SettingStringList                        // []string, MinItems–MaxItems items, each at most MaxLen
	SettingObject                            // free-form object, merged per key (deeply) on PATCH
	SettingArray                             // free-form array, replaced on PATCH
)

// SettingField describes one leaf of a settings document. Values are held in
// canonical Go types: bool, int64, string, []int64, []string, and plain JSON
// (map[string]any / []any with float64 numbers) for objects and arrays.
type SettingField struct {
	Path     string // dotted JSON path, e.g. "requestQueue.maxWaitMs"
	Kind     SettingKind
	Default  any
	Min, Max int64 // SettingInt and SettingIntList items
	// MinItems/MaxItems bound lists (0 = no bound).
	MinItems, MaxItems int
	MaxLen             int    // SettingString and SettingStringList items (0 = no bound)
	Env                string // environment variable supplying the default, "" = none
	// Check runs after the kind checks, on the merged value for objects. It
	// returns the value to store (it may normalise) and problems keyed by a
	// path suffix: "" is the field itself, ".3.status" a part of it. live is
	// true for PATCH values: lookups against other state (known providers)
	// run only then, so a stored value never becomes unreadable because,
	// say, a custom provider was deleted later.
	Check func(v any, live bool) (any, map[string]string)
}

// SettingValues holds values by field path. Stored values are sparse;
// effective values have every field.
type SettingValues map[string]any

// Int returns an integer value (0 when absent).
func (v SettingValues) Int(path string) int64 { n, _ := v[path].(int64); return n }

// Bool returns a boolean value (false when absent).
func (v SettingValues) Bool(path string) bool { b, _ := v[path].(bool); return b }

// String returns a string value ("" when absent).
func (v SettingValues) String(path string) string { s, _ := v[path].(string); return s }

// SettingsSchema is the set of fields of one document.
type SettingsSchema struct {
	fields []*SettingField
	byPath map[string]*SettingField
	root   *settingNode
}

type settingNode struct {
	children map[string]*settingNode
	field    *SettingField
}

// NewSettingsSchema indexes fields; it panics on a malformed schema (a
// programming error).
func NewSettingsSchema(fields []SettingField) *SettingsSchema {
	s := &SettingsSchema{byPath: map[string]*SettingField{}, root: &settingNode{children: map[string]*settingNode{}}}
	for i := range fields {
		f := &fields[i]
		if _, dup := s.byPath[f.Path]; dup {
			panic("settings schema: duplicate field " + f.Path)
		}
		s.fields = append(s.fields, f)
		s.byPath[f.Path] = f
		node := s.root
		parts := strings.Split(f.Path, ".")
		for j, p := range parts {
			if node.field != nil {
				panic("settings schema: " + f.Path + " nests under a field")
			}
			child := node.children[p]
			if child == nil {
				child = &settingNode{children: map[string]*settingNode{}}
				node.children[p] = child
			}
			node = child
			if j == len(parts)-1 {
				if len(node.children) > 0 {
					panic("settings schema: " + f.Path + " is a section")
				}
				node.field = f
			}
		}
	}
	return s
}

// Fields returns the fields in schema order.
func (s *SettingsSchema) Fields() []SettingField {
	out := make([]SettingField, len(s.fields))
	for i, f := range s.fields {
		out[i] = *f
	}
	return out
}

// Field returns the field at path.
func (s *SettingsSchema) Field(path string) (SettingField, bool) {
	f, ok := s.byPath[path]
	if !ok {
		return SettingField{}, false
	}
	return *f, true
}

// Defaults returns every field's built-in default.
func (s *SettingsSchema) Defaults() SettingValues {
	out := SettingValues{}
	for _, f := range s.fields {
		out[f.Path] = cloneSettingValue(f.Default)
	}
	return out
}

// Nest turns values into the nested JSON object of the document.
func (s *SettingsSchema) Nest(v SettingValues) map[string]any {
	root := map[string]any{}
	for _, f := range s.fields {
		val, ok := v[f.Path]
		if !ok {
			continue
		}
		parts := strings.Split(f.Path, ".")
		m := root
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = val
	}
	return root
}

// ReadEnv reads the fields' environment variables. An empty variable is
// unset; an unparsable or out-of-range one is ignored and reported in
// warnings (one sentence each).
func (s *SettingsSchema) ReadEnv(getenv func(string) string) (SettingValues, []string) {
	out := SettingValues{}
	var warnings []string
	if getenv == nil {
		return out, nil
	}
	for _, f := range s.fields {
		if f.Env == "" {
			continue
		}
		raw := getenv(f.Env)
		if strings.TrimSpace(raw) == "" {
			continue
		}
		var val any
		var msg string
		switch f.Kind {
		case SettingBool:
			b, ok := ParseEnvBool(raw)
			if !ok {
				msg = "must be true, 1, on, yes, false, 0, off or no"
			}
			val = b
		case SettingInt:
			n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
			switch {
			case errors.Is(err, strconv.ErrRange):
				msg = settingRangeMsg(f.Min, f.Max)
			case err != nil:
				msg = "must be a whole number"
			case n < f.Min || n > f.Max:
				msg = settingRangeMsg(f.Min, f.Max)
			}
			val = n
		case SettingString:
			val, msg = raw, checkSettingString(f, raw)
		default:
			msg = "cannot be set from the environment"
		}
		if msg == "" && f.Check != nil {
			var errs map[string]string
			val, errs = f.Check(val, false)
			if len(errs) > 0 {
				msg = errs[settingFirstKey(errs)]
			}
		}
		if msg != "" {
			warnings = append(warnings, fmt.Sprintf("%s=%q is ignored (%s %s); using the default", f.Env, raw, f.Path, msg))
			continue
		}
		out[f.Path] = val
	}
	return out, warnings
}

// ParseEnvBool reads an environment boolean: true|1|on|yes or false|0|off|no
// (any case, surrounding space ignored).
func ParseEnvBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "on", "yes":
		return true, true
	case "false", "0", "off", "no":
		return false, true
	}
	return false, false
}

// Effective layers stored over env over defaults and reports each field's
// source (default, env or stored).
func (s *SettingsSchema) Effective(stored, env SettingValues) (SettingValues, map[string]string) {
	eff := SettingValues{}
	src := map[string]string{}
	for _, f := range s.fields {
		switch v, ok := stored[f.Path]; {
		case ok:
			eff[f.Path], src[f.Path] = v, SourceStored
		default:
			if v, ok := env[f.Path]; ok {
				eff[f.Path], src[f.Path] = v, SourceEnv
			} else {
				eff[f.Path], src[f.Path] = cloneSettingValue(f.Default), SourceDefault
			}
		}
	}
	return eff, src
}

// DecodeSettingsPatch parses a PATCH body: a non-empty JSON object, numbers
// kept exact (json.Number).
func DecodeSettingsPatch(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &SettingsJSONError{Detail: fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)}
		}
		if errors.Is(err, io.EOF) {
			return nil, &SettingsJSONError{Detail: "the body is empty"}
		}
		return nil, &SettingsJSONError{Detail: err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &SettingsJSONError{Detail: "unexpected data after the JSON object"}
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, &SettingsJSONError{Detail: "expected a JSON object"}
	}
	if len(m) == 0 {
		return nil, ErrEmptySettingsPatch
	}
	return m, nil
}

// Apply merges a decoded patch into stored values (which it does not
// modify): sections merge field by field, objects merge per key, arrays and
// scalars are replaced, null deletes the stored value (a null section
// deletes every stored value in it). base supplies the current effective
// value an object field merges into when nothing is stored; live is true for
// a PATCH (see SettingField.Check). It returns the new stored values, the
// fields the patch changed and the problems of each field (a field with a
// problem keeps its previous value and does not count as changed).
func (s *SettingsSchema) Apply(stored, base SettingValues, patch map[string]any, live bool) (SettingValues, map[string]bool, map[string]string) {
	next := SettingValues{}
	for k, v := range stored {
		next[k] = v
	}
	touched := map[string]bool{}
	errs := map[string]string{}
	s.applyNode(s.root, "", patch, next, base, live, touched, errs)
	return next, touched, errs
}

func (s *SettingsSchema) applyNode(node *settingNode, prefix string, obj map[string]any, next, base SettingValues, live bool, touched map[string]bool, errs map[string]string) {
	for _, k := range settingSortedKeys(obj) {
		v := obj[k]
		path := joinSettingPath(prefix, k)
		child := node.children[k]
		if child == nil {
			errs[path] = "unknown field"
			continue
		}
		if child.field == nil {
			if v == nil {
				for _, f := range s.fields {
					if strings.HasPrefix(f.Path, path+".") {
						delete(next, f.Path)
						touched[f.Path] = true
					}
				}
				continue
			}
			m, ok := v.(map[string]any)
			if !ok {
				errs[path] = "must be an object"
				continue
			}
			s.applyNode(child, path, m, next, base, live, touched, errs)
			continue
		}
		f := child.field
		if v == nil {
			delete(next, path)
			touched[path] = true
			continue
		}
		var val any
		var problems map[string]string
		if f.Kind == SettingObject {
			m, ok := v.(map[string]any)
			if !ok {
				errs[path] = "must be an object"
				continue
			}
			cur, ok := next[path].(map[string]any)
			if !ok {
				cur, _ = base[path].(map[string]any)
			}
			merged, _ := cloneSettingValue(cur).(map[string]any)
			if merged == nil {
				merged = map[string]any{}
			}
			mergeSettingObject(merged, plainSettingJSON(m).(map[string]any))
			val = merged
			if f.Check != nil {
				val, problems = f.Check(merged, live)
			}
		} else {
			val, problems = decodeSettingValue(f, v, live)
		}
		if len(problems) > 0 {
			for suffix, msg := range problems {
				errs[path+suffix] = msg
			}
			continue
		}
		next[path] = val
		touched[path] = true
	}
}

// decodeSettingValue checks a patch value against its field.
func decodeSettingValue(f *SettingField, v any, live bool) (any, map[string]string) {
	one := func(msg string) (any, map[string]string) { return nil, map[string]string{"": msg} }
	var val any
	switch f.Kind {
	case SettingBool:
		b, ok := v.(bool)
		if !ok {
			return one("must be true or false")
		}
		val = b
	case SettingInt:
		n, msg := settingInt(v, f.Min, f.Max)
		if msg != "" {
			return one(msg)
		}
		val = n
	case SettingString:
		str, ok := v.(string)
		if !ok {
			return one("must be a string")
		}
		if msg := checkSettingString(f, str); msg != "" {
			return one(msg)
		}
		val = str
	case SettingIntList, SettingStringList:
		arr, ok := v.([]any)
		if !ok {
			return one("must be an array")
		}
		if msg := checkSettingItems(f, len(arr)); msg != "" {
			return one(msg)
		}
		problems := map[string]string{}
		ints := make([]int64, 0, len(arr))
		strs := make([]string, 0, len(arr))
		for i, item := range arr {
			suffix := "." + strconv.Itoa(i)
			if f.Kind == SettingIntList {
				n, msg := settingInt(item, f.Min, f.Max)
				if msg != "" {
					problems[suffix] = msg
				}
				ints = append(ints, n)
				continue
			}
			str, ok := item.(string)
			switch {
			case !ok:
				problems[suffix] = "must be a string"
			case f.MaxLen > 0 && utf8.RuneCountInString(str) > f.MaxLen:
				problems[suffix] = fmt.Sprintf("must be at most %d characters", f.MaxLen)
			}
			strs = append(strs, str)
		}
		if len(problems) > 0 {
			return nil, problems
		}
		if f.Kind == SettingIntList {
			val = ints
		} else {
			val = strs
		}
	case SettingArray:
		arr, ok := v.([]any)
		if !ok {
			return one("must be an array")
		}
		if msg := checkSettingItems(f, len(arr)); msg != "" {
			return one(msg)
		}
		val = plainSettingJSON(arr)
	default:
		return one("cannot be set")
	}
	if f.Check != nil {
		return f.Check(val, live)
	}
	return val, nil
}

func checkSettingItems(f *SettingField, n int) string {
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

func checkSettingString(f *SettingField, s string) string {
	if f.MaxLen > 0 && utf8.RuneCountInString(s) > f.MaxLen {
		return fmt.Sprintf("must be at most %d characters", f.MaxLen)
	}
	return ""
}

// settingInt reads a JSON number as a whole number within [min, max].
func settingInt(v any, min, max int64) (int64, string) {
	var lit string
	switch n := v.(type) {
	case json.Number:
		lit = n.String()
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return 0, "must be a whole number"
		}
		if n < float64(min) || n > float64(max) {
			return 0, settingRangeMsg(min, max)
		}
		return int64(n), ""
	case int64:
		if n < min || n > max {
			return 0, settingRangeMsg(min, max)
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
		return 0, settingRangeMsg(min, max)
	}
	return n, ""
}

func settingRangeMsg(min, max int64) string {
	return fmt.Sprintf("must be between %d and %d", min, max)
}

// plainSettingJSON converts decoded JSON (json.Number numbers) to plain JSON
// with float64 numbers, copying maps and slices.
func plainSettingJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plainSettingJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainSettingJSON(e)
		}
		return out
	}
	return v
}

// cloneSettingValue deep-copies a canonical value.
func cloneSettingValue(v any) any {
	switch x := v.(type) {
	case []int64:
		return slices.Clone(x)
	case []string:
		return slices.Clone(x)
	case map[string]any, []any, json.Number:
		return plainSettingJSON(x)
	}
	return v
}

// mergeSettingObject merges patch into dst: nested objects per key, null
// deletes a key, anything else replaces.
func mergeSettingObject(dst, patch map[string]any) {
	for k, v := range patch {
		if v == nil {
			delete(dst, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeSettingObject(dm, pm)
				continue
			}
			fresh := map[string]any{}
			mergeSettingObject(fresh, pm)
			dst[k] = fresh
			continue
		}
		dst[k] = v
	}
}

func joinSettingPath(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func settingSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func settingFirstKey(m map[string]string) string { return settingSortedKeys(m)[0] }

// ---- documents with a store, revisions and a published snapshot ----

// SettingsCheck is what cross-field rules see.
type SettingsCheck struct {
	Ctx     context.Context
	Values  SettingValues     // effective values of every field
	Sources map[string]string // source of every field
	// Patched lists the fields the PATCH touched; nil when loading.
	Patched map[string]bool
}

// Touched reports whether the PATCH touched path.
func (c SettingsCheck) Touched(path string) bool { return c.Patched[path] }

// SettingProblem is a cross-field rule violation.
type SettingProblem struct {
	Path    string
	Message string
	// Related lists other fields the rule read; at start an env value among
	// Path and Related is dropped (with a warning) to resolve the problem.
	Related []string
}

// SettingsDocSpec defines one settings document.
type SettingsDocSpec[T any] struct {
	Key    string // settings store key
	Schema *SettingsSchema
	// Derive adjusts effective values computed from others (source "derived").
	Derive func(eff SettingValues, sources map[string]string)
	// Cross runs the cross-field rules on the merged effective document.
	Cross func(doc *T, c SettingsCheck) []SettingProblem
	// Finish completes a built document (non-field data, caches).
	Finish func(doc *T)
}

// Build makes the typed document from effective values.
func (spec SettingsDocSpec[T]) Build(eff SettingValues) (T, error) {
	var doc T
	b, err := json.Marshal(spec.Schema.Nest(eff))
	if err != nil {
		return doc, fmt.Errorf("settings %s: encode: %w", spec.Key, err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return doc, fmt.Errorf("settings %s: build: %w", spec.Key, err)
	}
	if spec.Finish != nil {
		spec.Finish(&doc)
	}
	return doc, nil
}

// effective layers stored over env over defaults, then derived values.
func (spec SettingsDocSpec[T]) effective(stored, env SettingValues) (SettingValues, map[string]string) {
	eff, src := spec.Schema.Effective(stored, env)
	if spec.Derive != nil {
		spec.Derive(eff, src)
	}
	return eff, src
}

// Defaults builds the document from built-in defaults only.
func (spec SettingsDocSpec[T]) Defaults() T {
	doc, err := spec.Build(func() SettingValues { eff, _ := spec.effective(nil, nil); return eff }())
	if err != nil {
		panic(err) // the schema's own defaults always build
	}
	return doc
}

// SettingsSnapshot is one published state of a document. Treat it as
// read-only: readers share it.
type SettingsSnapshot[T any] struct {
	Doc      T
	Revision int64 // 0 = nothing stored yet
	sources  map[string]string
	stored   SettingValues
}

// ETag is the quoted revision, "r<revision>".
func (s *SettingsSnapshot[T]) ETag() string { return `"r` + strconv.FormatInt(s.Revision, 10) + `"` }

// Source returns the source of one field: default, env, stored or derived.
func (s *SettingsSnapshot[T]) Source(path string) string { return s.sources[path] }

// Sources lists the fields whose value is not the built-in default.
func (s *SettingsSnapshot[T]) Sources() map[string]string {
	out := map[string]string{}
	for k, v := range s.sources {
		if v != SourceDefault {
			out[k] = v
		}
	}
	return out
}

// SettingsDoc is a loaded settings document: it reads env once, publishes
// the effective document lock-free and applies PATCHes through the store.
type SettingsDoc[T any] struct {
	spec     SettingsDocSpec[T]
	store    SettingsStore
	env      SettingValues
	defaults T
	log      *slog.Logger
	mu       sync.Mutex
	cur      atomic.Pointer[SettingsSnapshot[T]]
}

// OpenSettingsDoc reads the environment (warning once about each ignored
// variable) and the stored document, and publishes the effective document.
func OpenSettingsDoc[T any](ctx context.Context, store SettingsStore, spec SettingsDocSpec[T], getenv func(string) string, log *slog.Logger) (*SettingsDoc[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &SettingsDoc[T]{spec: spec, store: store, log: log, defaults: spec.Defaults()}
	env, warnings := spec.Schema.ReadEnv(getenv)
	for _, w := range warnings {
		log.Warn("setting from the environment ignored", "settings", spec.Key, "detail", w)
	}
	d.env = d.dropConflictingEnv(ctx, env)
	if err := d.Reload(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// dropConflictingEnv removes env values that break a cross-field rule
// against the defaults and the other env values.
func (d *SettingsDoc[T]) dropConflictingEnv(ctx context.Context, env SettingValues) SettingValues {
	if d.spec.Cross == nil {
		return env
	}
	for range len(env) + 1 {
		eff, src := d.spec.effective(nil, env)
		doc, err := d.spec.Build(eff)
		if err != nil {
			return env
		}
		problems := d.spec.Cross(&doc, SettingsCheck{Ctx: ctx, Values: eff, Sources: src})
		dropped := false
		for _, p := range problems {
			for _, path := range append([]string{p.Path}, p.Related...) {
				if _, ok := env[path]; ok {
					f := d.spec.Schema.byPath[path]
					d.log.Warn("setting from the environment ignored", "settings", d.spec.Key,
						"detail", fmt.Sprintf("%s is ignored (%s: %s); using the default", f.Env, p.Path, p.Message))
					delete(env, path)
					dropped = true
					break
				}
			}
		}
		if !dropped {
			return env
		}
	}
	return env
}

// Reload reads the stored document again and publishes it.
func (d *SettingsDoc[T]) Reload(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	stored, rev, err := d.read(ctx, true)
	if err != nil {
		return err
	}
	snap, problems, err := d.snapshot(ctx, stored, rev, nil)
	if err != nil {
		return err
	}
	for _, p := range problems {
		d.log.Warn("stored settings break a rule", "settings", d.spec.Key, "field", p.Path, "detail", p.Message)
	}
	d.cur.Store(snap)
	return nil
}

// read loads the stored values; warn logs stored fields that no longer pass.
func (d *SettingsDoc[T]) read(ctx context.Context, warn bool) (SettingValues, int64, error) {
	raw, rev, err := d.store.GetSetting(ctx, d.spec.Key)
	if errors.Is(err, ErrNotFound) {
		return SettingValues{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := dec.Decode(&root); err != nil {
			if warn {
				d.log.Warn("stored settings are unreadable and ignored", "settings", d.spec.Key, "err", err)
			}
			return SettingValues{}, rev, nil
		}
	}
	stored, _, errs := d.spec.Schema.Apply(nil, nil, root, false)
	if warn {
		for _, path := range settingSortedKeys(errs) {
			d.log.Warn("stored setting ignored", "settings", d.spec.Key, "field", path, "detail", errs[path])
		}
	}
	return stored, rev, nil
}

func (d *SettingsDoc[T]) snapshot(ctx context.Context, stored SettingValues, rev int64, patched map[string]bool) (*SettingsSnapshot[T], []SettingProblem, error) {
	eff, src := d.spec.effective(stored, d.env)
	doc, err := d.spec.Build(eff)
	if err != nil {
		return nil, nil, err
	}
	var problems []SettingProblem
	if d.spec.Cross != nil {
		problems = d.spec.Cross(&doc, SettingsCheck{Ctx: ctx, Values: eff, Sources: src, Patched: patched})
	}
	return &SettingsSnapshot[T]{Doc: doc, Revision: rev, sources: src, stored: stored}, problems, nil
}

// Current returns the published snapshot (lock-free).
func (d *SettingsDoc[T]) Current() *SettingsSnapshot[T] { return d.cur.Load() }

// Defaults returns the document of built-in defaults (no env, nothing stored).
func (d *SettingsDoc[T]) Defaults() T { return d.defaults }

// Spec returns the document's definition.
func (d *SettingsDoc[T]) Spec() SettingsDocSpec[T] { return d.spec }

// Patch applies a PATCH body (40-admin-api §2.2). ifMatch is the If-Match
// header ("" = none). Every problem comes back at once as a
// *ValidationError; nothing is stored on any error.
func (d *SettingsDoc[T]) Patch(ctx context.Context, body []byte, ifMatch string) (*SettingsSnapshot[T], error) {
	patch, err := DecodeSettingsPatch(body)
	if err != nil {
		return nil, err
	}
	if err := PatchSettings(ctx, SettingsPatch{Doc: d, Patch: patch, IfMatch: ifMatch}); err != nil {
		return nil, err
	}
	return d.Current(), nil
}

// SettingsPatch is one document's part of a PATCH.
type SettingsPatch struct {
	Doc     SettingsPatcher
	Patch   map[string]any // decoded with json.Number numbers (DecodeSettingsPatch)
	IfMatch string
}

// SettingsPatcher is a *SettingsDoc of any document type.
type SettingsPatcher interface {
	lock()
	unlock()
	prepare(ctx context.Context, patch map[string]any, ifMatch string) (settingsPrepared, map[string]string, error)
	commit(ctx context.Context, p settingsPrepared) error
}

type settingsPrepared any

type preparedDoc[T any] struct {
	stored SettingValues
	rev    int64
	snap   *SettingsSnapshot[T]
}

func (d *SettingsDoc[T]) lock()   { d.mu.Lock() }
func (d *SettingsDoc[T]) unlock() { d.mu.Unlock() }

func (d *SettingsDoc[T]) prepare(ctx context.Context, patch map[string]any, ifMatch string) (settingsPrepared, map[string]string, error) {
	stored, rev, err := d.read(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	if !RevisionMatches(ifMatch, rev) {
		return nil, nil, ErrPreconditionFailed
	}
	base, _ := d.spec.effective(stored, d.env)
	next, touched, errs := d.spec.Schema.Apply(stored, base, patch, true)
	snap, problems, err := d.snapshot(ctx, next, rev, touched)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range problems {
		if _, ok := errs[p.Path]; !ok {
			errs[p.Path] = p.Message
		}
	}
	return preparedDoc[T]{stored: next, rev: rev, snap: snap}, errs, nil
}

func (d *SettingsDoc[T]) commit(ctx context.Context, p settingsPrepared) error {
	prep := p.(preparedDoc[T])
	b, err := json.Marshal(d.spec.Schema.Nest(prep.stored))
	if err != nil {
		return err
	}
	rev, err := d.store.PutSetting(ctx, d.spec.Key, b, prep.rev)
	if err != nil {
		return err
	}
	snap := *prep.snap
	snap.Revision = rev
	d.cur.Store(&snap)
	return nil
}

// PatchSettings validates every part, then stores them in order; any
// problem in any part → one *ValidationError and nothing stored. A stale
// IfMatch is ErrPreconditionFailed; a concurrent write by another process
// without IfMatch is retried on the fresh document. Parts lock in the given
// order: callers spanning documents must always use the same order.
func PatchSettings(ctx context.Context, parts ...SettingsPatch) error {
	for _, p := range parts {
		p.Doc.lock()
		defer p.Doc.unlock()
	}
	for attempt := 0; ; attempt++ {
		preps := make([]settingsPrepared, len(parts))
		fields := map[string]string{}
		for i, p := range parts {
			prep, errs, err := p.Doc.prepare(ctx, p.Patch, p.IfMatch)
			if err != nil {
				return err
			}
			for k, v := range errs {
				if _, ok := fields[k]; !ok {
					fields[k] = v
				}
			}
			preps[i] = prep
		}
		if len(fields) > 0 {
			return &ValidationError{Fields: fields}
		}
		retry := false
		for i, p := range parts {
			err := p.Doc.commit(ctx, preps[i])
			if errors.Is(err, ErrConflict) {
				if p.IfMatch != "" {
					return ErrPreconditionFailed
				}
				if attempt < maxSettingsRetries {
					retry = true
					break
				}
			}
			if err != nil {
				return err
			}
		}
		if !retry {
			return nil
		}
	}
}

// maxSettingsRetries bounds the re-reads after a concurrent write by another
// process (each one means the other writer made progress).
const maxSettingsRetries = 16

// RevisionMatches reports whether an If-Match header value names rev
// (`"r12"`, also W/"r12", r12, a list, or *). "" matches.
func RevisionMatches(ifMatch string, rev int64) bool {
	ifMatch = strings.TrimSpace(ifMatch)
	if ifMatch == "" || ifMatch == "*" {
		return true
	}
	want := "r" + strconv.FormatInt(rev, 10)
	for _, tag := range strings.Split(ifMatch, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if strings.Trim(tag, `"`) == want {
			return true
		}
	}
	return false
}

// ---- the general settings document (40-admin-api §2.5) ----

// GeneralSettings is the effective general settings document.
type GeneralSettings struct {
	Routing     RoutingSettings     `json:"routing"`
	Limits      LimitSettings       `json:"limits"`
	Server      ServerSettings      `json:"server"`
	Stream      StreamSettings      `json:"stream"`
	Upstream    UpstreamSettings    `json:"upstream"`
	CORS        CORSSettings        `json:"cors"`
	Translation TranslationSettings `json:"translation"`
	Logging     LoggingSettings     `json:"logging"`
}

// RoutingSettings are the global routing settings (30-routing §3, §11).
type RoutingSettings struct {
	MaxAttemptsPerRequest int                         `json:"maxAttemptsPerRequest"`
	RequestDeadlineMs     int64                       `json:"requestDeadlineMs"`
	FallbackStrategy      string                      `json:"fallbackStrategy"`
	StickyRoundRobinLimit int                         `json:"stickyRoundRobinLimit"`
	ProviderStrategies    map[string]ProviderStrategy `json:"providerStrategies"`
	QuotaMaxStaleMs       int64                       `json:"quotaMaxStaleMs"`
	AutoTaskFitness       []TaskFitnessRule           `json:"autoTaskFitness"`
	ComboDefaults         map[string]any              `json:"comboDefaults"`
	EchoRequestedModel    bool                        `json:"echoRequestedModel"`
}

// ProviderStrategy overrides the account strategy of one provider.
type ProviderStrategy struct {
	FallbackStrategy      *string `json:"fallbackStrategy,omitempty"`
	StickyRoundRobinLimit *int    `json:"stickyRoundRobinLimit,omitempty"`
}

// AccountStrategy returns the strategy and sticky limit for provider
// (30-routing §11 step 4).
func (r RoutingSettings) AccountStrategy(provider string) (strategy string, stickyLimit int) {
	strategy, stickyLimit = r.FallbackStrategy, r.StickyRoundRobinLimit
	if ps, ok := r.ProviderStrategies[provider]; ok {
		if ps.FallbackStrategy != nil {
			strategy = *ps.FallbackStrategy
		}
		if ps.StickyRoundRobinLimit != nil {
			stickyLimit = *ps.StickyRoundRobinLimit
		}
	}
	return strategy, stickyLimit
}

// TaskFitnessRule is one routing.autoTaskFitness rule (30-routing §10.14).
type TaskFitnessRule struct {
	ModelPattern string  `json:"modelPattern"`
	Task         string  `json:"task"`
	Score        float64 `json:"score"`
}

// LimitSettings are the request limits (10-gateway-api §10).
type LimitSettings struct {
	MaxBodyBytes   int64 `json:"maxBodyBytes"`
	MaxHeaderBytes int   `json:"maxHeaderBytes"`
	MaxJSONDepth   int   `json:"maxJsonDepth"`
	MaxMessages    int   `json:"maxMessages"`
}

// ServerSettings configure the listener (apply after a restart).
type ServerSettings struct {
	ReadHeaderTimeoutMs int64 `json:"readHeaderTimeoutMs"`
	BodyReadTimeoutMs   int64 `json:"bodyReadTimeoutMs"`
	IdleTimeoutMs       int64 `json:"idleTimeoutMs"`
}

// StreamSettings tune client streams (10-gateway-api §7.3, §7.5).
type StreamSettings struct {
	KeepaliveIdleMs int64 `json:"keepaliveIdleMs"`
	WriteTimeoutMs  int64 `json:"writeTimeoutMs"`
}

// UpstreamSettings tune upstream connections (10-gateway-api §7.5).
type UpstreamSettings struct {
	ConnectTimeoutMs    int64 `json:"connectTimeoutMs"`
	StreamIdleTimeoutMs int64 `json:"streamIdleTimeoutMs"`
}

// CORSSettings list the origins allowed on /v1 (10-gateway-api §1).
type CORSSettings struct {
	AllowedOrigins []string `json:"allowedOrigins"`
}

// TranslationSettings tune format translation (10-gateway-api §6.2).
type TranslationSettings struct {
	DefaultMaxTokens int `json:"defaultMaxTokens"`
}

// LoggingSettings tune the request log (10-gateway-api §11, 40-admin-api §8).
type LoggingSettings struct {
	CaptureBodies   bool `json:"captureBodies"`
	CaptureMaxBytes int  `json:"captureMaxBytes"`
	RetentionDays   int  `json:"retentionDays"`
}

// GeneralSettingsOptions are the lookups validation needs.
type GeneralSettingsOptions struct {
	// KnownProvider reports whether id is a catalogue id or an existing
	// custom provider (routing.providerStrategies keys); nil accepts any id.
	KnownProvider func(id string) bool
}

// Env names of general settings.
const (
	EnvLogRetentionDays  = "SWITCHYARD_LOG_RETENTION_DAYS"
	EnvLogRequestBodies  = "SWITCHYARD_LOG_REQUEST_BODIES"
	GeneralCaptureBodies = "logging.captureBodies"
)

// GeneralSettingsSpec defines the general settings document.
func GeneralSettingsSpec(opts GeneralSettingsOptions) SettingsDocSpec[GeneralSettings] {
	ms := func(path string, def, min, max int64) SettingField {
		return SettingField{Path: path, Kind: SettingInt, Default: def, Min: min, Max: max}
	}
	strategies := AccountStrategies()
	fields := []SettingField{
		ms("routing.maxAttemptsPerRequest", 30, 1, 100),
		ms("routing.requestDeadlineMs", 600000, 1000, 3600000),
		{Path: "routing.fallbackStrategy", Kind: SettingString, Default: "fill-first", Check: func(v any, _ bool) (any, map[string]string) {
			if !contains(strategies, v.(string)) {
				return nil, map[string]string{"": "must be one of " + strings.Join(strategies, ", ")}
			}
			return v, nil
		}},
		ms("routing.stickyRoundRobinLimit", 3, 1, 1000),
		{Path: "routing.providerStrategies", Kind: SettingObject, Default: map[string]any{}, Check: func(v any, live bool) (any, map[string]string) {
			known := opts.KnownProvider
			if !live {
				known = nil
			}
			return checkProviderStrategies(v.(map[string]any), strategies, known)
		}},
		ms("routing.quotaMaxStaleMs", 86400000, 60000, 604800000),
		{Path: "routing.autoTaskFitness", Kind: SettingArray, Default: []any{}, MaxItems: 100, Check: checkTaskFitness},
		{Path: "routing.comboDefaults", Kind: SettingObject, Default: map[string]any{}, Check: func(v any, _ bool) (any, map[string]string) {
			clean, errs := ValidateComboConfig(v.(map[string]any))
			if len(errs) > 0 {
				out := map[string]string{}
				for k, msg := range errs {
					out["."+k] = msg
				}
				return nil, out
			}
			return clean, nil
		}},
		{Path: "routing.echoRequestedModel", Kind: SettingBool, Default: false},
		ms("limits.maxBodyBytes", 33554432, 1<<20, 256<<20),
		ms("limits.maxHeaderBytes", 65536, 4096, 1<<20),
		ms("limits.maxJsonDepth", 64, 16, 256),
		ms("limits.maxMessages", 10000, 1, 100000),
		ms("server.readHeaderTimeoutMs", 10000, 1000, 300000),
		ms("server.bodyReadTimeoutMs", 60000, 1000, 3600000),
		ms("server.idleTimeoutMs", 120000, 1000, 3600000),
		ms("stream.keepaliveIdleMs", 2000, 0, 60000),
		ms("stream.writeTimeoutMs", 30000, 1000, 600000),
		ms("upstream.connectTimeoutMs", 10000, 1000, 120000),
		ms("upstream.streamIdleTimeoutMs", 120000, 1000, 3600000),
		{Path: "cors.allowedOrigins", Kind: SettingStringList, Default: []string{}, MaxItems: 100, MaxLen: 253, Check: checkOrigins},
		ms("translation.defaultMaxTokens", 4096, 1, 1000000),
		{Path: GeneralCaptureBodies, Kind: SettingBool, Default: false, Env: EnvLogRequestBodies},
		ms("logging.captureMaxBytes", 32768, 1024, 1<<20),
		{Path: "logging.retentionDays", Kind: SettingInt, Default: int64(7), Min: 1, Max: 3650, Env: EnvLogRetentionDays},
	}
	for i := range fields {
		if n, ok := fields[i].Default.(int); ok {
			fields[i].Default = int64(n)
		}
	}
	return SettingsDocSpec[GeneralSettings]{
		Key:    SettingsGeneral,
		Schema: NewSettingsSchema(fields),
		Finish: func(g *GeneralSettings) {
			if g.Routing.ProviderStrategies == nil {
				g.Routing.ProviderStrategies = map[string]ProviderStrategy{}
			}
			if g.Routing.AutoTaskFitness == nil {
				g.Routing.AutoTaskFitness = []TaskFitnessRule{}
			}
			if g.Routing.ComboDefaults == nil {
				g.Routing.ComboDefaults = map[string]any{}
			}
			if g.CORS.AllowedOrigins == nil {
				g.CORS.AllowedOrigins = []string{}
			}
		},
	}
}

// DefaultGeneralSettings is the general document with built-in defaults.
func DefaultGeneralSettings() GeneralSettings {
	return GeneralSettingsSpec(GeneralSettingsOptions{}).Defaults()
}

func checkProviderStrategies(m map[string]any, strategies []string, known func(string) bool) (any, map[string]string) {
	errs := map[string]string{}
	for id, v := range m {
		p := "." + id
		if known != nil && !known(id) {
			errs[p] = "unknown provider"
			continue
		}
		ps, ok := v.(map[string]any)
		if !ok {
			errs[p] = "must be an object"
			continue
		}
		for k, x := range ps {
			switch k {
			case "fallbackStrategy":
				if s, ok := x.(string); !ok || !contains(strategies, s) {
					errs[p+"."+k] = "must be one of " + strings.Join(strategies, ", ")
				}
			case "stickyRoundRobinLimit":
				if _, msg := settingInt(x, 1, 1000); msg != "" {
					errs[p+"."+k] = msg
				}
			default:
				errs[p+"."+k] = "unknown field"
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return m, nil
}

func checkTaskFitness(v any, _ bool) (any, map[string]string) {
	errs := map[string]string{}
	for i, item := range v.([]any) {
		p := "." + strconv.Itoa(i)
		r, ok := item.(map[string]any)
		if !ok {
			errs[p] = "must be an object"
			continue
		}
		for k := range r {
			if k != "modelPattern" && k != "task" && k != "score" {
				errs[p+"."+k] = "unknown field"
			}
		}
		if s, ok := r["modelPattern"].(string); !ok || strings.TrimSpace(s) == "" || utf8.RuneCountInString(s) > 200 {
			errs[p+".modelPattern"] = "must be a pattern of 1 to 200 characters"
		}
		if s, _ := r["task"].(string); s != "code" && s != "reasoning" && s != "chat" {
			errs[p+".task"] = "must be one of code, reasoning, chat"
		}
		if f, ok := r["score"].(float64); !ok || f < 0 || f > 1 {
			errs[p+".score"] = "must be a number between 0 and 1"
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return v, nil
}

func checkOrigins(v any, _ bool) (any, map[string]string) {
	errs := map[string]string{}
	for i, o := range v.([]string) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs["."+strconv.Itoa(i)] = "must be an origin such as https://app.example.com"
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return v, nil
}
