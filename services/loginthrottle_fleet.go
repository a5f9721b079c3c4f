package services

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// FleetLoginThrottle is the sign-in throttle of a fleet: the shared store's
// throttle counts every replica's checks as one, and while that store does
// not answer, this replica's own in-memory throttle decides instead (fail
// open to the local limits, never to none). Refusing every sign-in during a
// database outage would protect nothing — sign-in needs the database for
// the password and the session anyway — and would keep an admin out for
// the whole outage once the database is back but slow; counting locally
// keeps the limit per replica for those minutes. The switch is logged once
// each way.
type FleetLoginThrottle struct {
	shared  LoginThrottle
	local   LoginThrottle
	timeout time.Duration
	log     *slog.Logger
	onLocal func(error) // a decision taken locally (metrics); may be nil
	down    atomic.Bool
}

var _ LoginThrottle = (*FleetLoginThrottle)(nil)

// fleetReserveTimeout bounds one shared reservation: a database that hangs
// (a cut network sends no reset) must not hold a sign-in longer than this
// before the local throttle decides.
const fleetReserveTimeout = 3 * time.Second

// localPrefix marks the reservations the local throttle made, so Settle
// goes back to the throttle that counted them.
const localPrefix = "local:"

// NewFleetLoginThrottle counts in shared and falls back to local while
// shared answers ErrUnavailable (or takes longer than 3 s).
func NewFleetLoginThrottle(shared, local LoginThrottle, log *slog.Logger, onLocal func(error)) *FleetLoginThrottle {
	if log == nil {
		log = slog.Default()
	}
	return &FleetLoginThrottle{shared: shared, local: local, timeout: fleetReserveTimeout, log: log, onLocal: onLocal}
}

// Reserve implements LoginThrottle.
func (f *FleetLoginThrottle) Reserve(ctx context.Context, a LoginAttempt) (LoginReservation, error) {
	sctx, cancel := context.WithTimeout(ctx, f.timeout)
	res, err := f.shared.Reserve(sctx, a)
	cancel()
	if err == nil {
		if f.down.CompareAndSwap(true, false) {
			f.log.Info("sign-in throttle: the shared database answers again; failures are counted for the fleet")
		}
		return res, nil
	}
	if ctx.Err() != nil || !(errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
		return LoginReservation{}, err // the request ended, or a real fault: fail closed
	}
	if f.down.CompareAndSwap(false, true) {
		f.log.Warn("sign-in throttle: the shared database does not answer; this replica counts its own failures until it does", "err", err)
	}
	if f.onLocal != nil {
		f.onLocal(err)
	}
	res, err = f.local.Reserve(ctx, a)
	if err == nil && res.ID != "" {
		res.ID = localPrefix + res.ID
	}
	return res, err
}

// Settle implements LoginThrottle.
func (f *FleetLoginThrottle) Settle(ctx context.Context, r LoginReservation, o LoginOutcome) error {
	if id, ok := strings.CutPrefix(r.ID, localPrefix); ok {
		r.ID = id
		return f.local.Settle(ctx, r, o)
	}
	return f.shared.Settle(ctx, r, o)
}
