package app

import (
	"context"
	"sync"
	"time"
)

// retentionEvery is how often old request-log rows and audit entries are
// deleted (10-gateway-api §11: pruned daily).
const retentionEvery = 24 * time.Hour

// retention runs PurgeOldLogs every retentionEvery until stop.
type retention struct {
	stop chan struct{}
	once sync.Once
	done sync.WaitGroup
}

// startRetention purges once now, then daily on its own goroutine; Close
// stops it.
func (s *Server) startRetention() {
	s.purgeOnce()
	s.purge = &retention{stop: make(chan struct{})}
	s.purge.done.Add(1)
	go func() {
		defer s.purge.done.Done()
		t := time.NewTicker(retentionEvery)
		defer t.Stop()
		for {
			select {
			case <-s.purge.stop:
				return
			case <-t.C:
				s.purgeOnce()
			}
		}
	}()
}

func (s *Server) purgeOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := s.PurgeOldLogs(ctx); err != nil {
		s.log.Warn("log retention purge", "err", err)
	}
}

func (r *retention) close() {
	if r == nil {
		return
	}
	r.once.Do(func() { close(r.stop) })
	r.done.Wait()
}

// PurgeOldLogs deletes the request-log rows and audit entries older than
// logging.retentionDays (default 7) and returns how many of each.
func (s *Server) PurgeOldLogs(ctx context.Context) (requests, audit int64, err error) {
	days := s.settingDocs.General.Current().Doc.Logging.RetentionDays
	if days <= 0 {
		return 0, 0, nil
	}
	cut := s.clock.Now().Add(-time.Duration(days) * 24 * time.Hour)
	if requests, err = s.logStore.PurgeRequestLogs(ctx, cut); err != nil {
		return requests, 0, err
	}
	audit, err = s.auditStore.PurgeAuditEntries(ctx, cut)
	return requests, audit, err
}
