package app

import (
	"context"
	"fmt"
	"os"
	"sync"

	"switchyard/models"
)

// sharedState is what a replica of a fleet runs besides the embedded mode's
// components: the PostgreSQL change feed (LISTEN/NOTIFY, resync on every
// reconnect, version poll) through which every replica's caches follow the
// admin writes made on any of them. nil in embedded mode.
type sharedState struct {
	feed    *models.PGFeed
	replica string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newSharedState(s *Server) *sharedState {
	replica := s.cfg.ReplicaID
	if replica == "" {
		host, _ := os.Hostname()
		replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if s.cfg.RedisURL == "" {
		s.log.Warn("limits are per replica: max_concurrent slots, per-key limits, the request queue and the window gate are counted by each replica, so with N replicas a limit admits up to N times as much; set SWITCHYARD_REDIS_URL to count them across the fleet")
	}
	return &sharedState{
		replica: replica,
		feed:    models.NewPGFeed(s.db, s.cfg.DatabaseURL, replica, s.localFeed, s.log.With("component", "change-feed")),
	}
}

// start runs the background loops until stop.
func (sh *sharedState) start() {
	ctx, cancel := context.WithCancel(context.Background())
	sh.cancel = cancel
	sh.wg.Go(func() { sh.feed.Run(ctx) })
}

func (sh *sharedState) stop() {
	if sh.cancel != nil {
		sh.cancel()
		sh.wg.Wait()
	}
}
