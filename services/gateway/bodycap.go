package gateway

import (
	"errors"
	"fmt"
	"io"
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
	// beyond the first eventFree of an event or bodyFree of a body: the
	// ordinary answers never touch it, and 200 hostile streams together hold
	// at most this much instead of 200 × MaxEventBytes.
	BudgetBytes int64
}

// DefaultBodyLimits are the documented defaults.
func DefaultBodyLimits() BodyLimits {
	return BodyLimits{MaxEventBytes: 4 << 20, MaxBodyBytes: 16 << 20, BudgetBytes: 64 << 20}
}

// What an event or a body may hold without drawing on the budget.
const (
	eventFree = 64 << 10
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

// growBuf is one growing buffer (an SSE line, an event's data, a body):
// nothing grows past max, and capacity beyond free is drawn from the budget
// and given back on release.
type growBuf struct {
	b       []byte
	max     int
	free    int
	budget  *memBudget
	charged int64
	tooBig  error
}

// reserve makes room for n more bytes.
func (g *growBuf) reserve(n int) error {
	need := len(g.b) + n
	if need > g.max {
		return g.tooBig
	}
	if need <= cap(g.b) {
		return nil
	}
	newCap := max(2*cap(g.b), need, 512)
	if newCap > g.max {
		newCap = g.max
	}
	if over := int64(newCap-g.free) - g.charged; newCap > g.free && over > 0 {
		if !g.budget.take(over) {
			return errBudgetSpent
		}
		g.charged += over
	}
	nb := make([]byte, len(g.b), newCap)
	copy(nb, g.b)
	g.b = nb
	return nil
}

// add appends p.
func (g *growBuf) add(p ...byte) error {
	if err := g.reserve(len(p)); err != nil {
		return err
	}
	g.b = append(g.b, p...)
	return nil
}

// reset empties the buffer for the next event, dropping a large one.
func (g *growBuf) reset() {
	if cap(g.b) > g.free {
		g.release()
		g.b = nil
		return
	}
	g.b = g.b[:0]
}

// release gives the budget back (the buffer itself is garbage from here).
func (g *growBuf) release() {
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
		if len(g.b) == cap(g.b) {
			room := min(4<<10, g.max-len(g.b))
			if room <= 0 {
				return g, errBodyTooLarge
			}
			if err := g.reserve(room); err != nil {
				return g, err
			}
		}
		n, err := r.Read(g.b[len(g.b):cap(g.b)])
		g.b = g.b[:len(g.b)+n]
		if len(g.b) > int(lim.MaxBodyBytes) {
			return g, errBodyTooLarge
		}
		if err == io.EOF {
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
