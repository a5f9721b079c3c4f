package traffic_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"switchyard/internal/testkit/feeds"
	"switchyard/services"
	"switchyard/services/traffic"
)

// What A learned reaches B with A's debounced write; B does not write it
// back; a newer observation on B is not replaced by an older one from A; a
// resync loads the stored limits.
func TestSharedLearnedLimitsFollowAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	rows := newMemLearnedStore()
	fleet := feeds.New("A", "B")
	a, b := traffic.NewQueues(clock, nil), traffic.NewQueues(clock, nil)
	for i, q := range []*traffic.Queues{a, b} {
		q.UseLearnedStore(rows)
		q.ShareLearned(fleet.Feed(i), func(err error) { t.Error(err) })
	}
	a.Learn(ctx, "openai:c_1", learnHeaders("500", "20")) // < 10 % left: throttled
	if n, err := a.PersistLearned(ctx); err != nil || n != 1 {
		t.Fatalf("A persisted %d, %v", n, err)
	}
	got := b.Learned()
	if len(got) != 1 || got[0].Key != "openai:c_1" || got[0].LimitRequests != 500 || got[0].Remaining != 20 || !got[0].Throttled {
		t.Fatalf("B's learned limits %+v, want A's throttle of openai:c_1", got)
	}
	if n, _ := b.PersistLearned(ctx); n != 0 {
		t.Fatalf("B wrote back %d limits it only received", n)
	}
	// B learns something newer; A's older write arriving late changes nothing.
	clock.now = t0.Add(time.Second)
	b.Learn(ctx, "openai:c_1", learnHeaders("500", "400"))
	_ = fleet.Feed(0).Publish(ctx, services.Change{Kind: services.ChangeLearnedLimit, Key: "openai:c_1",
		Payload: `{"l":500,"r":1,"m":110,"o":` + strconv.FormatInt(t0.UnixMilli(), 10) + `}`})
	if l := b.Learned()[0]; l.Remaining != 400 || l.Throttled {
		t.Fatalf("an older limit replaced B's newer one: %+v", l)
	}
	// A limit whose change was lost arrives with B's resync.
	fleet.Pause()
	clock.now = t0.Add(2 * time.Second)
	a.Learn(ctx, "openai:c_2", learnHeaders("100", "90"))
	if n, _ := a.PersistLearned(ctx); n != 1 {
		t.Fatalf("A persisted %d, want c_2", n)
	}
	fleet.Drop()
	if len(b.Learned()) != 1 {
		t.Fatal("B saw a dropped change")
	}
	if err := fleet.Feed(1).Resync(ctx, services.ChangeLearnedLimit); err != nil {
		t.Fatal(err)
	}
	if got := b.Learned(); len(got) != 2 || got[1].Key != "openai:c_2" {
		t.Fatalf("after resync %+v", got)
	}
}
