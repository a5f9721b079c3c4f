package traffic

// CountFailOpen records a dispatch that a shared (fleet-wide) gate sent
// without a slot, in this replica's counters, so /api/concurrency and the
// metrics count fail-open grants the same whichever gate decided. cause is
// "queue_full" or "timeout".
func (s *Slots) CountFailOpen(connectionID string, limit int, cause string) {
	s.mu.Lock()
	g := s.gateLocked(connectionID)
	if g.limit == 0 {
		g.limit = limit
	}
	if cause == causeQueueFull {
		g.grants.QueueFull++
	} else {
		g.grants.Timeout++
	}
	s.mu.Unlock()
}
