package settings

import (
	"context"
	"encoding/json"
	"errors"

	"switchyard/services"
	"switchyard/services/settings/schema"
)

// Patch applies a PATCH body (40-admin-api §2.2). ifMatch is the If-Match
// header ("" = none). Every problem comes back at once as a
// *services.ValidationError; nothing is stored on any error. Other errors:
// ErrEmptyPatch, *JSONError, ErrPreconditionFailed (stale ifMatch). A
// stored document whose change-feed subscribers failed comes back with
// their error.
func (d *Document[T]) Patch(ctx context.Context, body []byte, ifMatch string) (*Snapshot[T], error) {
	patch, err := DecodePatch(body)
	if err != nil {
		return nil, err
	}
	if err := PatchAll(ctx, Part{Doc: d, Patch: patch, IfMatch: ifMatch}); err != nil {
		var ferr *FeedError
		if errors.As(err, &ferr) {
			return d.Current(), err
		}
		return nil, err
	}
	return d.Current(), nil
}

// Part is one document's part of a PATCH that may span documents.
type Part struct {
	Doc     Patcher
	Patch   map[string]any // decoded with json.Number numbers (DecodePatch)
	IfMatch string
}

// Patcher is a *Document of any document type.
type Patcher interface {
	lock()
	unlock()
	prepare(ctx context.Context, patch map[string]any, ifMatch string) (prepared, map[string]string, error)
	commit(ctx context.Context, p prepared) error
	published(ctx context.Context) error
}

type prepared any

type preparedDoc[T any] struct {
	stored schema.Values
	rev    int64
	snap   *Snapshot[T]
}

func (d *Document[T]) lock()   { d.mu.Lock() }
func (d *Document[T]) unlock() { d.mu.Unlock() }

func (d *Document[T]) prepare(ctx context.Context, patch map[string]any, ifMatch string) (prepared, map[string]string, error) {
	stored, rev, err := d.read(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	if !RevisionMatches(ifMatch, rev) {
		return nil, nil, ErrPreconditionFailed
	}
	base, _ := d.spec.Effective(stored, d.env)
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

// commit stores the prepared values with the revision they were read at as
// the expected one: the store's compare-and-set refuses the write with
// services.ErrConflict when anyone wrote in between.
func (d *Document[T]) commit(ctx context.Context, p prepared) error {
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

// PatchAll validates every part, then stores them in order; any problem in
// any part → one *services.ValidationError and nothing stored. A stale
// IfMatch is ErrPreconditionFailed; a concurrent write by another process
// without IfMatch is retried on the fresh document. Parts lock in the given
// order: callers spanning documents must always use the same order. Once
// stored, each part is published on its change feed; subscribers' errors
// come back as a *FeedError (the documents are stored all the same).
func PatchAll(ctx context.Context, parts ...Part) error {
	if err := patchLocked(ctx, parts); err != nil {
		return err
	}
	var errs []error
	for _, p := range parts {
		errs = append(errs, p.Doc.published(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return &FeedError{Err: err}
	}
	return nil
}

// FeedError says settings were stored but a cache subscribed to the change
// feed could not follow; it wraps the subscribers' errors.
type FeedError struct{ Err error }

func (e *FeedError) Error() string { return "settings stored; " + e.Err.Error() }
func (e *FeedError) Unwrap() error { return e.Err }

func patchLocked(ctx context.Context, parts []Part) error {
	for _, p := range parts {
		p.Doc.lock()
		defer p.Doc.unlock()
	}
	for attempt := 0; ; attempt++ {
		preps, err := prepareAll(ctx, parts)
		if err != nil {
			return err
		}
		retry, err := commitAll(ctx, parts, preps, attempt < maxRetries)
		if err != nil || !retry {
			return err
		}
	}
}

// prepareAll validates every part against its freshly read document.
func prepareAll(ctx context.Context, parts []Part) ([]prepared, error) {
	preps := make([]prepared, len(parts))
	fields := map[string]string{}
	for i, p := range parts {
		prep, errs, err := p.Doc.prepare(ctx, p.Patch, p.IfMatch)
		if err != nil {
			return nil, err
		}
		for k, v := range errs {
			if _, ok := fields[k]; !ok {
				fields[k] = v
			}
		}
		preps[i] = prep
	}
	if len(fields) > 0 {
		return nil, &services.ValidationError{Fields: fields}
	}
	return preps, nil
}

// commitAll stores the parts in order; it reports retry when another
// process wrote first and the caller may read again.
func commitAll(ctx context.Context, parts []Part, preps []prepared, mayRetry bool) (retry bool, err error) {
	for i, p := range parts {
		err := p.Doc.commit(ctx, preps[i])
		if errors.Is(err, services.ErrConflict) {
			if p.IfMatch != "" {
				return false, ErrPreconditionFailed
			}
			if mayRetry {
				return true, nil
			}
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// maxRetries bounds the re-reads after a concurrent write by another
// process (each one means the other writer made progress).
const maxRetries = 16
