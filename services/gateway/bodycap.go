package gateway

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// BodyLimits bound what one upstream answer can make the gateway hold in
// memory (issue 17: one 50 MB SSE line took the process from 27 to 294 MB,
// a 300 MB JSON body was read up to 64 MiB per request).
type BodyLimits struct {
	// MaxEventBytes caps one SSE event: a single line and the data of all
	// its lines together. No real model event comes near the default.
	MaxEventBytes int
	// MaxBodyBytes caps one non-stream answer.
	MaxBodyBytes int64
	// BudgetBytes caps, across every upstream call at once, the bytes held
	// beyond the first eventFree of an event or bodyFree of a body: ordinary
	// answers never touch it, and 200 hostile streams together hold at most
	// this much instead of 200 × MaxEventBytes. The default keeps the whole
	// process under 150 MiB with 200 of them (TestHostileUpstreamMemory:
	// 133 MiB; 64 MiB of budget gave 157 MiB).
	BudgetBytes int64
}

// DefaultBodyLimits are the documented defaults.
func DefaultBodyLimits() BodyLimits {
	return BodyLimits{MaxEventBytes: 4 << 20, MaxBodyBytes: 16 << 20, BudgetBytes: 32 << 20}
}

// What an event or a body may hold without drawing on the budget: SSE
// lines up to 1 KiB do not even leave the relay's read buffer, and a few
// KiB cover tool-call and reasoning deltas.
const (
	eventFree = 8 << 10
	bodyFree  = 256 << 10
)

// CodeBufferBusy is the local refusal of an answer that needs more memory
// while the budget is spent by others: it penalises no connection (the one
// answering is not at fault) and the request fails over.
const CodeBufferBusy = services.CodeUpstreamBufferBusy

var (
	errEventTooLarge = errors.New("upstream event too large")
	errBodyTooLarge  = errors.New("upstream body too large")
	errBudgetSpent   = errors.New("upstream buffer budget spent")
)

// memBudget is the process-wide byte budget of oversized buffers.
type memBudget struct {
	limit atomic.Int64
	used  atomic.Int64
}

func (b *memBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.limit.Load() {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *memBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// growBuf is one growing buffer (an SSE line, an event's data, a body).
// Up to free bytes it is one ordinary slice; beyond that it is a list of
// pooled 64 KiB chunks, each taken from the budget before it is filled, so
// an oversized answer costs exactly the bytes read (no doubling copies
// left as garbage) and a hostile one gives its chunks back to the next.
// Nothing grows past max. bytes joins the chunks when the whole value is
// needed (a legitimate large event or body); the budget stays charged until
// release.
type growBuf struct {
	b       []byte
	chunks  []*[]byte
	n       int
	max     int
	free    int
	budget  *memBudget
	charged int64
	tooBig  error
}

const chunkSize = 64 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize); return &b }}

// room returns the slice the next bytes go into, at least 1 byte long,
// taking a chunk from the budget when the last one is full.
func (g *growBuf) room() ([]byte, error) {
	if g.n >= g.max {
		return nil, g.tooBig
	}
	if g.chunks == nil {
		if len(g.b) < g.free {
			if len(g.b) == cap(g.b) {
				nb := make([]byte, len(g.b), min(max(2*cap(g.b), 512), g.free))
				copy(nb, g.b)
				g.b = nb
			}
			return g.b[len(g.b):cap(g.b)], nil
		}
	} else if last := *g.chunks[len(g.chunks)-1]; len(last) < cap(last) {
		return last[len(last):cap(last)], nil
	}
	if !g.budget.take(chunkSize) {
		return nil, errBudgetSpent
	}
	g.charged += chunkSize
	c := chunkPool.Get().(*[]byte)
	*c = (*c)[:0]
	g.chunks = append(g.chunks, c)
	return (*c)[:cap(*c)], nil
}

// wrote records n bytes written into the slice room returned.
func (g *growBuf) wrote(n int) {
	g.n += n
	if g.chunks == nil {
		g.b = g.b[:len(g.b)+n]
		return
	}
	c := g.chunks[len(g.chunks)-1]
	*c = (*c)[:len(*c)+n]
}

// add appends p.
func (g *growBuf) add(p ...byte) error {
	if g.n+len(p) > g.max {
		return g.tooBig
	}
	if g.chunks == nil && len(g.b)+len(p) <= cap(g.b) {
		g.b = append(g.b, p...)
		g.n += len(p)
		return nil
	}
	for len(p) > 0 {
		r, err := g.room()
		if err != nil {
			return err
		}
		k := copy(r, p)
		g.wrote(k)
		p = p[k:]
	}
	return nil
}

// bytes is the whole value as one slice.
func (g *growBuf) bytes() []byte {
	if g.chunks == nil {
		return g.b
	}
	out := make([]byte, 0, g.n)
	out = append(out, g.b...)
	for _, c := range g.chunks {
		out = append(out, *c...)
		chunkPool.Put(c)
	}
	g.chunks, g.b = nil, out
	g.free = cap(out) // a joined buffer is not grown further
	return out
}

// reset empties the buffer for the next event, dropping a large one.
func (g *growBuf) reset() {
	if g.chunks != nil || cap(g.b) > eventFree {
		g.release()
		g.b = nil
	}
	g.b, g.n = g.b[:0], 0
}

// release gives the chunks and the budget back; the buffer is empty after.
func (g *growBuf) release() {
	for _, c := range g.chunks {
		chunkPool.Put(c)
	}
	g.chunks = nil
	if g.charged > 0 {
		g.budget.give(g.charged)
		g.charged = 0
	}
}

// readBody reads a non-stream answer whole, within the limits.
func (u *Upstream) readBody(r io.Reader) (*growBuf, error) {
	lim := u.limits()
	g := &growBuf{max: int(lim.MaxBodyBytes) + 1, free: bodyFree, budget: u.budget, tooBig: errBodyTooLarge}
	for {
		room, err := g.room()
		if err != nil {
			return g, err
		}
		if len(room) > g.max-g.n {
			room = room[:g.max-g.n]
		}
		n, err := r.Read(room)
		g.wrote(n)
		if g.n > int(lim.MaxBodyBytes) {
			return g, errBodyTooLarge
		}
		if err == io.EOF {
			g.bytes()
			return g, nil
		}
		if err != nil {
			return g, err
		}
	}
}

// limitResult is the result of an answer over its cap or the budget: over
// its cap a malformed answer (failover, counted against the connection like
// any unusable answer), over the budget a local refusal that penalises
// nothing.
func limitResult(err error, lim BodyLimits) (result, bool) {
	switch {
	case errors.Is(err, errEventTooLarge):
		return resBad(resilience.DetailMalformed, fmt.Sprintf("an upstream stream event is larger than %s", sizeText(int64(lim.MaxEventBytes)))), true
	case errors.Is(err, errBodyTooLarge):
		return resBad(resilience.DetailMalformed, fmt.Sprintf("the upstream answer is larger than %s", sizeText(lim.MaxBodyBytes))), true
	case errors.Is(err, errBudgetSpent):
		le := &traffic.LimitError{Code: CodeBufferBusy, RetryAfter: time.Second,
			Message: "Switchyard's memory for oversized upstream answers is in use; retry shortly."}
		return result{localErr: le, message: le.Message}, true
	}
	return result{}, false
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
