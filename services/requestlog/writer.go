// Package requestlog writes log entries asynchronously in batches
// (40-admin-api §8): the request path hands an entry to Add, which never
// blocks, and one goroutine writes batches to a sink every FlushInterval or as
// soon as BatchSize entries are waiting. The request log (Writer, over a
// services.RequestLogSink) and the audit log of admin actions share the one
// generic Batcher, so both have the same bounds, drop rule and shutdown. It
// imports only services and the standard library.
package requestlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// Defaults of Options.
const (
	DefaultFlushInterval = time.Second
	DefaultBatchSize     = 256
	DefaultCapacity      = 10000
)

// Options tunes a Batcher. Zero fields take the defaults.
type Options struct {
	// FlushInterval is the longest an accepted entry waits before its batch is written. Default 1 s.
	FlushInterval time.Duration
	// BatchSize is the most entries per sink call; a full batch is written at once. Default 256.
	BatchSize int
	// Capacity bounds the entries accepted but not yet written (queued, batched or being
	// written). Add refuses entries beyond it. Default 10000.
	Capacity int
}

func (o Options) withDefaults() Options {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	return o
}

// Stats is a snapshot of a Batcher's counters.
type Stats struct {
	// QueueDepth is the number of entries accepted and not yet handed back by the sink.
	QueueDepth int64
	// Dropped counts entries never handed to the sink: refused because the queue
	// was full or the writer closed, or abandoned when Close's context ended.
	// It feeds switchyard_request_log_dropped_total.
	Dropped int64
	// Batches counts batches the sink wrote successfully; Written counts their entries.
	Batches int64
	Written int64
	// FailedBatches counts batches the sink refused (their entries are lost).
	FailedBatches int64
	// Held is how many entries wait for a store that was unavailable (part
	// of QueueDepth); HeldBatches counts the batch writes postponed so.
	Held        int64
	HeldBatches int64
}

// Batcher batches entries of type T to a sink. It is safe for concurrent use.
type Batcher[T any] struct {
	write func(ctx context.Context, batch []T) error
	what  string // names the entries in log lines
	log   *slog.Logger
	opts  Options

	// pending holds the accepted entries run has not taken yet. Add appends
	// under mu and wakes run through kick only when a full batch is waiting,
	// so a request costs no goroutine wake-up of its own.
	mu      sync.Mutex
	pending []T
	kick    chan struct{}

	// queued counts entries accepted and not yet written; Add reserves a slot
	// here before appending, so pending never holds more than Capacity.
	queued        atomic.Int64
	dropped       atomic.Int64
	batches       atomic.Int64
	written       atomic.Int64
	failedBatches atomic.Int64
	heldBatches   atomic.Int64
	heldCount     atomic.Int64

	// held are entries whose write found the store unavailable (a shared
	// database restarting, SQLite busy): they stay queued, within Capacity,
	// and go first at the next flush, so an outage of the store costs no log
	// rows until the queue is full. Only run touches it.
	held []T

	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{} // closed by Close: drain and exit
	done      chan struct{} // closed by run when it has exited

	// writeCtx is passed to the sink; abort cancels it when Close's context ends.
	writeCtx context.Context
	abort    context.CancelFunc
	// abandoned counts entries dropped after abort; only run touches it.
	abandoned int64
}

// Writer batches request log entries to a services.RequestLogSink.
type Writer = Batcher[services.RequestLogEntry]

// New starts a request log Writer and its goroutine; Close stops it. log may be nil.
func New(sink services.RequestLogSink, log *slog.Logger, opts Options) *Writer {
	return NewBatcher(sink.WriteRequestLogs, "request log", log, opts)
}

// NewBatcher starts a Batcher writing through write and its goroutine; Close
// stops it. write is called from that one goroutine; the batch is reused
// afterwards and must not be kept. what names the entries in log lines
// ("audit log"); log may be nil.
func NewBatcher[T any](write func(ctx context.Context, batch []T) error, what string, log *slog.Logger, opts Options) *Batcher[T] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Batcher[T]{
		write:    write,
		what:     what,
		log:      log.With("component", "requestlog"),
		opts:     opts,
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		writeCtx: ctx,
		abort:    cancel,
	}
	go w.run()
	return w
}

// Add queues e for writing and reports whether it was accepted. It never blocks:
// when Capacity entries are already waiting, or after Close, e is dropped and
// counted. Entries added while Close is running may be lost uncounted; close the
// writer only after the request path has drained.
func (w *Batcher[T]) Add(e T) bool {
	if w.closed.Load() {
		w.dropped.Add(1)
		return false
	}
	if w.queued.Add(1) > int64(w.opts.Capacity) {
		w.queued.Add(-1)
		w.dropped.Add(1)
		return false
	}
	w.mu.Lock()
	w.pending = append(w.pending, e)
	full := len(w.pending) >= w.opts.BatchSize
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default: // run has a wake-up waiting already
		}
	}
	return true
}

// Close writes what is queued, stops the goroutine and returns nil. If ctx ends
// first, the write in progress is cancelled, what remains is counted as dropped
// and ctx.Err() is returned. Calling Close again waits the same way.
func (w *Batcher[T]) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		close(w.stop)
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		select {
		case <-w.done: // finished just in time
			return nil
		default:
		}
		w.abort()
		return fmt.Errorf("requestlog: close: %w", ctx.Err())
	}
}

// Stats returns the current counters.
func (w *Batcher[T]) Stats() Stats {
	return Stats{
		QueueDepth:    w.queued.Load(),
		Dropped:       w.dropped.Load(),
		Batches:       w.batches.Load(),
		Written:       w.written.Load(),
		FailedBatches: w.failedBatches.Load(),
		Held:          w.heldCount.Load(),
		HeldBatches:   w.heldBatches.Load(),
	}
}

func (w *Batcher[T]) run() {
	defer close(w.done)
	defer w.abort()
	tick := time.NewTicker(w.opts.FlushInterval)
	defer tick.Stop()
	var batch []T
	for {
		select {
		case <-w.kick:
			batch = w.flushAll(w.take(batch, true))
		case <-tick.C:
			batch = w.flushAll(w.take(batch, false))
		case <-w.stop:
			w.drain(batch)
			return
		}
	}
}

// take moves the pending entries into batch, only whole batches of
// BatchSize when fullOnly (the rest waits for the next interval).
func (w *Batcher[T]) take(batch []T, fullOnly bool) []T {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.pending)
	if fullOnly {
		n -= n % w.opts.BatchSize
	}
	batch = append(batch[:0], w.pending[:n]...)
	rest := copy(w.pending, w.pending[n:])
	clear(w.pending[rest:]) // drop references so taken entries can be collected
	w.pending = w.pending[:rest]
	return batch
}

// flushAll writes the held entries and then batch in BatchSize pieces and
// returns batch emptied for reuse. A piece the store could not take now
// (unavailable) is held with everything after it, in order.
func (w *Batcher[T]) flushAll(batch []T) []T {
	work := batch
	if len(w.held) > 0 {
		work = append(w.held, batch...)
		w.held = nil
	}
	for i := 0; i < len(work); i += w.opts.BatchSize {
		if !w.flush(work[i:min(i+w.opts.BatchSize, len(work))]) {
			w.held = append([]T(nil), work[i:]...)
			break
		}
	}
	if n := int64(len(w.held)); n != w.heldCount.Load() {
		switch {
		case n > 0 && w.heldCount.Load() == 0:
			w.log.Warn(w.what+": the store is unavailable; entries are held and retried each interval", "entries", n)
		case n == 0:
			w.log.Info(w.what + ": the store answers again; held entries written")
		}
		w.heldCount.Store(n)
	}
	clear(batch)
	return batch[:0]
}

// drain writes batch and everything still pending, in BatchSize batches.
func (w *Batcher[T]) drain(batch []T) {
	defer func() {
		if w.abandoned > 0 {
			w.log.Warn(w.what+" entries abandoned at close", "entries", w.abandoned)
		}
	}()
	w.flushAll(batch)
	for {
		batch = w.flushAll(w.take(batch, false))
		w.mu.Lock()
		empty := len(w.pending) == 0
		w.mu.Unlock()
		if empty {
			return
		}
	}
}

// flush hands batch to the sink. Once Close has given up (writeCtx
// cancelled) it counts the entries as dropped instead. It returns false when
// the store was unavailable and the entries stay queued for the next flush
// (never while closing: then they count as a failed batch).
func (w *Batcher[T]) flush(batch []T) bool {
	if len(batch) == 0 {
		return true
	}
	n := int64(len(batch))
	if w.writeCtx.Err() != nil {
		w.abandoned += n
		w.dropped.Add(n)
	} else if err := w.writeBatch(batch); err != nil {
		if errors.Is(err, services.ErrUnavailable) && !w.closed.Load() {
			w.heldBatches.Add(1)
			return false
		}
		w.failedBatches.Add(1)
		// Only the count and the error: entries may carry captured bodies.
		w.log.Error(w.what+" batch write failed", "entries", n, "err", err)
	} else {
		w.batches.Add(1)
		w.written.Add(n)
	}
	w.queued.Add(-n)
	return true
}

// writeBatch calls the sink, turning a panic into an error so one bad batch cannot
// stop the writer.
func (w *Batcher[T]) writeBatch(batch []T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("requestlog: sink panicked: %v", r)
		}
	}()
	return w.write(w.writeCtx, batch)
}
