package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// downSlots and downRates are shared stores that cannot reach their state.
type downSlots struct{ traffic.SlotStore }

func (downSlots) Acquire(context.Context, string, int) (func(), bool, error) {
	return func() {}, false, &services.UnavailableError{Op: "acquire slot", Err: errors.New("redis: connection refused")}
}

type downRates struct{ traffic.RateStore }

func (downRates) Admit(context.Context, string, traffic.QueueConfig) (traffic.Ticket, error) {
	return traffic.Ticket{}, &services.UnavailableError{Op: "admit", Err: errors.New("redis: i/o timeout")}
}

func (downRates) Learn(context.Context, string, http.Header) error {
	return &services.UnavailableError{Op: "learn", Err: errors.New("redis: i/o timeout")}
}

// storeErrors records Observer.StoreError.
type storeErrors struct {
	nopObserver
	got []string
}

func (o *storeErrors) StoreError(store string, _ error) { o.got = append(o.got, store) }

func admitEnv(tr *Traffic) (*Gateway, *storeErrors) {
	doc := resilience.DefaultDocument()
	doc.ConnectionConcurrency.Enabled = true
	tr.Doc = func() *resilience.Document { return &doc }
	obs := &storeErrors{}
	return &Gateway{obs: obs, traffic: tr, clock: services.RealClock{}}, obs
}

// A shared slot or queue store that cannot answer never fails the request
// nor holds it against the connection: admit lets it through without that
// gate and counts the error; learning from the response is counted too.
func TestAdmitFailsOpenWhenSharedStateIsDown(t *testing.T) {
	g, obs := admitEnv(&Traffic{Slots: downSlots{}, Queues: downRates{}})
	two, on := 2, true
	c := &services.Connection{ID: "c_1", MaxConcurrent: &two, RateLimitProtection: &on}
	tg := target{provider: services.Provider{ID: "openai"}, model: "m"}
	a, err := g.admit(context.Background(), tg, c, &Request{}, nil)
	if err != nil {
		t.Fatalf("admit failed with the shared state down: %v", err)
	}
	if a.release != nil || a.ticket != nil {
		t.Fatalf("admission holds a slot or ticket it never got: %+v", a)
	}
	g.learn(context.Background(), a, 200, http.Header{"X-Ratelimit-Remaining-Requests": {"5"}})
	a.done()
	if want := []string{StoreSlots, StoreRequestQueue, StoreRequestQueue}; !slices.Equal(obs.got, want) {
		t.Fatalf("store errors %v, want %v", obs.got, want)
	}
}

// A decision of the store is still a decision: CONNECTION_SLOTS_BUSY
// refuses the dispatch, and nothing is counted as a store error.
func TestAdmitKeepsLocalLimitDecisions(t *testing.T) {
	slots := traffic.NewSlots(func() traffic.SlotConfig {
		return traffic.SlotConfig{Enabled: true, QueueDepth: 0, SlotWaitMs: 0, FailOpen: false}
	})
	g, obs := admitEnv(&Traffic{Slots: slots})
	one := 1
	c := &services.Connection{ID: "c_1", MaxConcurrent: &one}
	tg := target{provider: services.Provider{ID: "openai"}, model: "m"}
	first, err := g.admit(context.Background(), tg, c, &Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.done()
	_, err = g.admit(context.Background(), tg, c, &Request{}, nil)
	var le *traffic.LimitError
	if !errors.As(err, &le) || le.Code != traffic.CodeSlotsBusy {
		t.Fatalf("second admit = %v, want CONNECTION_SLOTS_BUSY", err)
	}
	if len(obs.got) != 0 {
		t.Fatalf("a local decision counted as store errors: %v", obs.got)
	}
}

// failingToolStore fails every write.
type failingToolStore struct{}

var errToolStore = errors.New("database is locked")

func (failingToolStore) LoadToolLimits(context.Context) ([]ToolLimit, error) { return nil, nil }
func (failingToolStore) SaveToolLimit(context.Context, ToolLimit) error      { return errToolStore }
func (failingToolStore) DeleteToolLimits(context.Context) (int, error)       { return 0, errToolStore }

// A learned tool limit applies at once even when its row cannot be written,
// and the error comes back for the gateway to count; a Clear whose delete
// fails forgets nothing (the rows would bring the limits back at start).
func TestToolLimitStoreErrorsAreReturned(t *testing.T) {
	ctx := context.Background()
	clock := &pickClock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	tl, err := NewToolLimits(ctx, clock, failingToolStore{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Learn(ctx, "openai", "m", 8, 12); !errors.Is(err, errToolStore) {
		t.Fatalf("Learn = %v, want the store's error", err)
	}
	if l, ok := tl.Get("openai", "m"); !ok || l.MaxTools != 8 {
		t.Fatalf("limit not applied: %+v %v", l, ok)
	}
	if n, err := tl.Clear(ctx); !errors.Is(err, errToolStore) || n != 0 {
		t.Fatalf("Clear = %d, %v", n, err)
	}
	if _, ok := tl.Get("openai", "m"); !ok {
		t.Fatal("Clear forgot a limit whose row it could not delete")
	}
}
