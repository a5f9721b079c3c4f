package services

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// LoginThrottle decides and counts admin password checks (50-dashboard
// §6.2: from the 5th failure per address within 15 min a wait of 30 s,
// doubling per further failure up to 15 min; from the 20th account-wide
// failure every non-loopback address waits too).
//
// The decision and the count are one atomic step: Reserve both decides
// whether a check may run and, when it may, counts it as a failure at once;
// Settle then says how the check ended. However many requests race, at
// most 5 checks per window run for one address (issue 17 item 5: 30
// parallel wrong passwords were all checked, because the count was taken
// after each check). The in-memory implementation counts per process; one
// over a shared store (PostgreSQL) implements Reserve as a single
// transaction — count the window's rows for the address and the account,
// insert the reservation only if the limits allow — and so counts
// fleet-wide.
type LoginThrottle interface {
	// Reserve decides whether a password check for a may run now. Allowed:
	// Wait is 0 and the returned reservation is already counted as a
	// failure. Refused: Wait > 0 and nothing is counted. An error refuses
	// the attempt (fail closed).
	Reserve(ctx context.Context, a LoginAttempt) (LoginReservation, error)
	// Settle records how the reserved check ended.
	Settle(ctx context.Context, r LoginReservation, o LoginOutcome) error
}

// LoginAttempt is one request to check the admin password.
type LoginAttempt struct {
	IP       string
	Loopback bool // loopback addresses keep only their per-address limit
	At       time.Time
}

// LoginReservation is Reserve's answer.
type LoginReservation struct {
	ID   string
	IP   string
	At   time.Time
	Wait time.Duration // > 0: refused, retry after this
}

// LoginOutcome is how a reserved check ended.
type LoginOutcome int

const (
	// LoginFailed: the password was wrong; the reservation stays counted.
	LoginFailed LoginOutcome = iota
	// LoginSucceeded: the address's failures are cleared, and the
	// reservation stops counting towards the account-wide limit.
	LoginSucceeded
	// LoginNotChecked: no check ran (the store failed, the request was
	// cancelled); the reservation is withdrawn.
	LoginNotChecked
)

// Throttling constants (50-dashboard §6.2).
const (
	throttleWindow      = 15 * time.Minute
	throttlePerIPFrom   = 5
	throttleAccountFrom = 20
	throttleBase        = 30 * time.Second
	throttleCap         = 15 * time.Minute
)

// loginMark is one counted check.
type loginMark struct {
	at time.Time
	id uint64
}

// MemoryLoginThrottle is the in-process LoginThrottle: one mutex over the
// failure times of each address and of the account.
type MemoryLoginThrottle struct {
	mu      sync.Mutex
	perIP   map[string][]loginMark
	account []loginMark
	seq     uint64
}

var _ LoginThrottle = (*MemoryLoginThrottle)(nil)

// NewMemoryLoginThrottle returns an empty throttle.
func NewMemoryLoginThrottle() *MemoryLoginThrottle {
	return &MemoryLoginThrottle{perIP: map[string][]loginMark{}}
}

// sweepEvery bounds the address map: past this many addresses, those with
// no failure left in the window are dropped.
const sweepEvery = 4096

// Reserve implements LoginThrottle.
func (m *MemoryLoginThrottle) Reserve(_ context.Context, a LoginAttempt) (LoginReservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := a.At
	fails := pruneMarks(m.perIP[a.IP], now)
	m.account = pruneMarks(m.account, now)
	wait := backoffWait(fails, throttlePerIPFrom, now)
	if !a.Loopback {
		if w := backoffWait(m.account, throttleAccountFrom, now); w > wait {
			wait = w
		}
	}
	if wait > 0 {
		m.perIP[a.IP] = fails
		return LoginReservation{IP: a.IP, At: now, Wait: wait}, nil
	}
	if len(m.perIP) >= sweepEvery {
		for ip, ms := range m.perIP {
			if len(pruneMarks(ms, now)) == 0 {
				delete(m.perIP, ip)
			}
		}
	}
	m.seq++
	mark := loginMark{at: now, id: m.seq}
	m.perIP[a.IP] = append(fails, mark)
	m.account = append(m.account, mark)
	return LoginReservation{ID: strconv.FormatUint(mark.id, 10), IP: a.IP, At: now}, nil
}

// Settle implements LoginThrottle.
func (m *MemoryLoginThrottle) Settle(_ context.Context, r LoginReservation, o LoginOutcome) error {
	if r.ID == "" || o == LoginFailed {
		return nil
	}
	id, err := strconv.ParseUint(r.ID, 10, 64)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.account = withoutMark(m.account, id)
	if o == LoginSucceeded {
		delete(m.perIP, r.IP) // a success clears the address's counter
		return nil
	}
	if ms := withoutMark(m.perIP[r.IP], id); len(ms) > 0 {
		m.perIP[r.IP] = ms
	} else {
		delete(m.perIP, r.IP)
	}
	return nil
}

func withoutMark(ms []loginMark, id uint64) []loginMark {
	for i, mk := range ms {
		if mk.id == id {
			return append(ms[:i:i], ms[i+1:]...)
		}
	}
	return ms
}

// backoffWait: from the from-th failure, wait 30 s after the last failure,
// doubling per further failure, capped at 15 min.
func backoffWait(fails []loginMark, from int, now time.Time) time.Duration {
	if len(fails) == 0 {
		return 0
	}
	return backoffWaitN(len(fails), fails[len(fails)-1].at, from, now)
}

// backoffWaitN is backoffWait from a count of failures and the latest one.
func backoffWaitN(n int, last time.Time, from int, now time.Time) time.Duration {
	if n < from {
		return 0
	}
	d := throttleBase
	for i := from; i < n && d < throttleCap; i++ {
		d *= 2
	}
	if d > throttleCap {
		d = throttleCap
	}
	if rem := last.Add(d).Sub(now); rem > 0 {
		return rem
	}
	return 0
}

// LoginWindow is how far back the throttle counts failures.
const LoginWindow = throttleWindow

// LoginWait is the wait the throttle's rules give an attempt at now, from
// the checks counted within LoginWindow: ipFails of its address (the latest
// at ipLast) and accountFails of every address (the latest at
// accountLast); a loopback address keeps only the per-address limit. A
// throttle over a shared store counts its rows and asks this, so the rules
// stay in one place for both implementations.
func LoginWait(ipFails int, ipLast time.Time, accountFails int, accountLast time.Time, loopback bool, now time.Time) time.Duration {
	wait := backoffWaitN(ipFails, ipLast, throttlePerIPFrom, now)
	if !loopback {
		wait = max(wait, backoffWaitN(accountFails, accountLast, throttleAccountFrom, now))
	}
	return wait
}

func pruneMarks(ms []loginMark, now time.Time) []loginMark {
	i := 0
	for i < len(ms) && now.Sub(ms[i].at) >= throttleWindow {
		i++
	}
	return ms[i:]
}
