// Package settings is the home of Switchyard's settings documents
// (40-admin-api §2, §2.5): one JSON object per settings key, stored
// sparsely (only explicitly set fields) with a revision, served as
// effective values (stored > env > default, 20-resilience §0) and decoded
// into typed Go structs that the rest of the code reads. A document is a
// schema (package schema: typed leaf fields, strict decoding with dotted
// field paths), derived values, cross-field rules on the merged result and
// a store with compare-and-set revisions behind If-Match.
//
// Two documents use it: the resilience document (its fields and rules live
// with the mechanisms in services/resilience) and the general document
// (general.go). Feature flags (flags.go) are views of their boolean fields.
package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"switchyard/services"
	"switchyard/services/settings/schema"
)

// Check is what cross-field rules see.
type Check struct {
	Ctx     context.Context
	Values  schema.Values     // effective values of every field
	Sources map[string]string // source of every field
	// Patched lists the fields the PATCH touched; nil when loading.
	Patched map[string]bool
}

// Touched reports whether the PATCH touched path.
func (c Check) Touched(path string) bool { return c.Patched[path] }

// Problem is a cross-field rule violation.
type Problem struct {
	Path    string
	Message string
	// Related lists other fields the rule read; at start an env value among
	// Path and Related is dropped (with a warning) to resolve the problem.
	Related []string
}

// Spec defines one settings document of type T.
type Spec[T any] struct {
	Key    string // settings store key
	Schema *schema.Schema
	// Derive adjusts effective values computed from others (source "derived").
	Derive func(eff schema.Values, sources map[string]string)
	// Cross runs the cross-field rules on the merged effective document.
	Cross func(doc *T, c Check) []Problem
	// Finish completes a built document (non-field data, empty lists).
	Finish func(doc *T)
}

// Build makes the typed document from effective values.
func (spec Spec[T]) Build(eff schema.Values) (T, error) {
	doc, err := schema.Build[T](spec.Schema, eff)
	if err != nil {
		return doc, fmt.Errorf("settings %s: %w", spec.Key, err)
	}
	if spec.Finish != nil {
		spec.Finish(&doc)
	}
	return doc, nil
}

// Effective layers stored over env over defaults, then derived values.
func (spec Spec[T]) Effective(stored, env schema.Values) (schema.Values, map[string]string) {
	eff, src := spec.Schema.Effective(stored, env)
	if spec.Derive != nil {
		spec.Derive(eff, src)
	}
	return eff, src
}

// Defaults builds the document from built-in defaults only.
func (spec Spec[T]) Defaults() T {
	eff, _ := spec.Effective(nil, nil)
	doc, err := spec.Build(eff)
	if err != nil {
		panic(err) // the schema's own defaults always build
	}
	return doc
}

// Snapshot is one published state of a document. Treat it as read-only:
// readers share it.
type Snapshot[T any] struct {
	Doc      T
	Revision int64 // 0 = nothing stored yet
	values   schema.Values
	sources  map[string]string
}

// ETag is the snapshot's entity tag, `"r<revision>"`.
func (s *Snapshot[T]) ETag() string { return ETag(s.Revision) }

// Source returns the source of one field: default, env, stored or derived.
func (s *Snapshot[T]) Source(path string) string { return s.sources[path] }

// Value returns the effective value of one field in its canonical type
// (int64, bool, []int64, …), as the schema holds it: what a form control
// shows and a feature flag reads, without re-encoding the typed document.
func (s *Snapshot[T]) Value(path string) any { return s.values[path] }

// Sources lists the fields whose value is not the built-in default.
func (s *Snapshot[T]) Sources() map[string]string {
	out := map[string]string{}
	for k, v := range s.sources {
		if v != schema.SourceDefault {
			out[k] = v
		}
	}
	return out
}

// Explain is GET …?explain=true: the effective document, the built-in
// defaults, the source of every non-default field and the revision.
type Explain[T any] struct {
	Settings T                 `json:"settings"`
	Defaults T                 `json:"defaults"`
	Sources  map[string]string `json:"sources"`
	Revision int64             `json:"revision"`
}

// Document is a loaded settings document: it reads env once, publishes the
// effective document lock-free and applies PATCHes through the store.
type Document[T any] struct {
	spec     Spec[T]
	store    services.SettingsStore
	env      schema.Values
	defaults T
	defVals  schema.Values
	log      *slog.Logger
	mu       sync.Mutex // serialises writers; readers never take it
	cur      atomic.Pointer[Snapshot[T]]
	feed     services.ChangeFeed
}

// Open reads the environment (warning once about each ignored variable)
// and the stored document, and publishes the effective document.
func Open[T any](ctx context.Context, store services.SettingsStore, spec Spec[T], getenv func(string) string, log *slog.Logger) (*Document[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Document[T]{spec: spec, store: store, log: log, defaults: spec.Defaults()}
	d.defVals, _ = spec.Effective(nil, nil)
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
func (d *Document[T]) dropConflictingEnv(ctx context.Context, env schema.Values) schema.Values {
	if d.spec.Cross == nil {
		return env
	}
	for range len(env) + 1 {
		eff, src := d.spec.Effective(nil, env)
		doc, err := d.spec.Build(eff)
		if err != nil {
			return env
		}
		if !d.dropOneEnvPerProblem(env, d.spec.Cross(&doc, Check{Ctx: ctx, Values: eff, Sources: src})) {
			return env
		}
	}
	return env
}

func (d *Document[T]) dropOneEnvPerProblem(env schema.Values, problems []Problem) bool {
	dropped := false
	for _, p := range problems {
		for _, path := range append([]string{p.Path}, p.Related...) {
			if _, ok := env[path]; ok {
				f, _ := d.spec.Schema.Field(path)
				d.log.Warn("setting from the environment ignored", "settings", d.spec.Key,
					"detail", fmt.Sprintf("%s is ignored (%s: %s); using the default", f.Env, p.Path, p.Message))
				delete(env, path)
				dropped = true
				break
			}
		}
	}
	return dropped
}

// Reload reads the stored document again and publishes it. It is the
// entry point for a change made elsewhere (another process writing the same
// database); Follow calls it when the change feed says so.
func (d *Document[T]) Reload(ctx context.Context) error {
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
func (d *Document[T]) read(ctx context.Context, warn bool) (schema.Values, int64, error) {
	raw, rev, err := d.store.GetSetting(ctx, d.spec.Key)
	if errors.Is(err, services.ErrNotFound) {
		return schema.Values{}, 0, nil
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
			return schema.Values{}, rev, nil
		}
	}
	stored, _, errs := d.spec.Schema.Apply(nil, nil, root, false)
	if warn {
		for _, path := range schema.SortedKeys(errs) {
			d.log.Warn("stored setting ignored", "settings", d.spec.Key, "field", path, "detail", errs[path])
		}
	}
	return stored, rev, nil
}

func (d *Document[T]) snapshot(ctx context.Context, stored schema.Values, rev int64, patched map[string]bool) (*Snapshot[T], []Problem, error) {
	eff, src := d.spec.Effective(stored, d.env)
	doc, err := d.spec.Build(eff)
	if err != nil {
		return nil, nil, err
	}
	var problems []Problem
	if d.spec.Cross != nil {
		problems = d.spec.Cross(&doc, Check{Ctx: ctx, Values: eff, Sources: src, Patched: patched})
	}
	return &Snapshot[T]{Doc: doc, Revision: rev, values: eff, sources: src}, problems, nil
}

// Current returns the published snapshot (lock-free).
func (d *Document[T]) Current() *Snapshot[T] { return d.cur.Load() }

// Defaults returns the document of built-in defaults (no env, nothing stored).
func (d *Document[T]) Defaults() T { return d.defaults }

// DefaultValue returns a field's built-in default (derived values
// included) in its canonical type, as Snapshot.Value does.
func (d *Document[T]) DefaultValue(path string) any { return d.defVals[path] }

// Explain is the current document with its defaults, sources and revision.
func (d *Document[T]) Explain() Explain[T] { return d.ExplainOf(d.Current()) }

// ExplainOf is Explain of one snapshot (the one whose ETag was sent).
func (d *Document[T]) ExplainOf(snap *Snapshot[T]) Explain[T] {
	return Explain[T]{Settings: snap.Doc, Defaults: d.defaults, Sources: snap.Sources(), Revision: snap.Revision}
}

// Schema returns the document's fields.
func (d *Document[T]) Schema() *schema.Schema { return d.spec.Schema }

// Follow joins the document to a change feed, the settings-changed hook of
// every cache of settings: each stored PATCH is published as
// ChangeSettings (Key = the store key, Version = the new revision), and a
// change with a newer revision than the one published here — stored by
// another process — or a resync (Key "") is read again.
func (d *Document[T]) Follow(feed services.ChangeFeed) {
	d.feed = feed
	feed.Subscribe(services.ChangeSettings, d.apply)
}

// apply is the ChangeSettings subscriber. The document's own PATCHes
// arrive with the revision it already publishes and change nothing.
func (d *Document[T]) apply(ctx context.Context, c services.Change) error {
	if c.Key != "" && (c.Key != d.spec.Key || c.Version <= d.Current().Revision) {
		return nil
	}
	return d.Reload(ctx)
}

// published announces the stored document on the feed; it runs after the
// PATCH released the document's lock, so subscribers may read (or reload)
// it.
func (d *Document[T]) published(ctx context.Context) error {
	if d.feed == nil {
		return nil
	}
	return d.feed.Publish(ctx, services.Change{Kind: services.ChangeSettings, Key: d.spec.Key, Version: d.Current().Revision})
}
