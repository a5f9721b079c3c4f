package redisstate

import (
	"testing"
	"time"
)

// A need notice that arrives while an admission asks for a block ends the
// reserve: the block the answer grants is given back, not spent, and no
// block is asked for until the hold-off ends.
func TestReserveBlockGrantedDuringHoldOffIsGivenBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := &reserve{}
	if _, want := r.startBlock(60_000, now); want != reserveBlockMax {
		t.Fatalf("asked for %d tokens, want a block of %d", want, reserveBlockMax)
	}
	if _, unused := r.need(now); unused != 0 {
		t.Fatalf("need returned %d tokens while the block was being asked for", unused)
	}
	if back := r.endBlock(reserveBlockMax, reserveBlockMax, now); back != reserveBlockMax {
		t.Fatalf("endBlock gave back %d tokens during the hold-off, want %d", back, reserveBlockMax)
	}
	if r.takeToken(now) {
		t.Fatal("a token of a block granted during the hold-off was spent")
	}
	if _, want := r.startBlock(60_000, now.Add(time.Second)); want != 0 {
		t.Fatal("a block was asked for during the hold-off")
	}
	after := now.Add(reserveHoldOff)
	if _, want := r.startBlock(60_000, after); want == 0 {
		t.Fatal("no block asked for after the hold-off")
	}
	if back := r.endBlock(reserveBlockMax, reserveBlockMax, after); back != 0 || !r.takeToken(after) {
		t.Fatal("a block after the hold-off is not spendable")
	}
}
