package app_test

import (
	"testing"
	"time"
)

// A served request moves the connection's last-used time forward, and the
// background batch writes it to the connection row (shown on the
// Connections page); an admin edit does not write an older value back.
func TestServedRequestSetsConnectionLastUsed(t *testing.T) {
	f := newGW(t, "fk-a")
	id := f.conns["fk-a"].ID
	if resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := f.app.Clock.Now()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := f.app.Server.Connections().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c.LastUsedAt != nil {
			if !c.LastUsedAt.Equal(want.Truncate(time.Millisecond)) {
				t.Fatalf("last used %v, want %v", c.LastUsedAt, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("last_used_at never written")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
