package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/leases"
	"switchyard/services/traffic"
)

// TrafficAPI serves the admission and placement state routes: the request
// queues and max_concurrent slots (40-admin-api §4.2), the exclusive leases
// and the session-affinity pins (§3).
type TrafficAPI struct {
	*API
	Status StatusReader
	Queues QueueAdmin
	Slots  SlotAdmin
	Leases LeaseAdmin
	Keys   KeyReader
	Pins   PinAdmin
	// Waiting lists the requests waiting now (nil = none listed).
	Waiting WaitingReader
}

// WaitingReader lists the requests waiting inside the gateway now
// (services/traffic.Waiting).
type WaitingReader interface {
	List() []traffic.WaitEntry
	Count() int
	Now() time.Time
}

// QueueAdmin reads and resets the request queues (services/traffic.RateStore).
type QueueAdmin interface {
	Stats() []traffic.QueueStats
	Reset(ctx context.Context) (int, error)
	ResetConnection(ctx context.Context, connectionID string) (int, error)
}

// SlotAdmin reads and resets the max_concurrent slots (services/traffic.SlotStore).
type SlotAdmin interface {
	SlotStats
	Reset(ctx context.Context) (int, error)
	ResetConnection(ctx context.Context, connectionID string) (int, error)
}

// PinAdmin counts and clears the session-affinity pins (services/affinity.Pins).
type PinAdmin interface {
	Count() int
	// ClearAll drops every pin and returns how many were live.
	ClearAll(ctx context.Context) (int, error)
}

type slotJSON struct {
	traffic.SlotStats
	Provider string `json:"provider"`
}

// ShowConcurrency answers GET /api/concurrency: the queues of the
// connections whose dispatches go through the request queue, every slot
// gate, and each request waiting now (cooldown, slot or queue wait).
func (h *TrafficAPI) ShowConcurrency(c echo.Context) error {
	snap := h.Status.Snapshot()
	queues := []traffic.QueueStats{}
	for _, q := range h.Queues.Stats() {
		if st, ok := snap.Connection(q.ConnectionID); ok && st.QueueProtected {
			queues = append(queues, q)
		}
	}
	slots := []slotJSON{}
	for _, s := range h.Slots.Stats() {
		p := ""
		if st, ok := snap.Connection(s.ConnectionID); ok {
			p = st.Conn.Provider
		}
		slots = append(slots, slotJSON{SlotStats: s, Provider: p})
	}
	waiting := []traffic.WaitEntry{}
	if h.Waiting != nil {
		waiting = h.Waiting.List()
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"queues": queues, "slots": slots, "waiting": waiting})
}

type concurrencyResetBody struct {
	Target       string `json:"target"`
	ConnectionID string `json:"connectionId"`
}

// ResetConcurrency answers POST /api/concurrency/reset: the slots, the
// queues or both, of one connection or all.
func (h *TrafficAPI) ResetConcurrency(c echo.Context) error {
	var in concurrencyResetBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.Target != "slots" && in.Target != "queues" && in.Target != "all" {
		return services.Invalid("target", "Use slots, queues or all.")
	}
	ctx := c.Request().Context()
	out := map[string]int{"slotsReset": 0, "queuesReset": 0}
	var err error
	if in.Target != "queues" {
		if in.ConnectionID != "" {
			out["slotsReset"], err = h.Slots.ResetConnection(ctx, in.ConnectionID)
		} else {
			out["slotsReset"], err = h.Slots.Reset(ctx)
		}
		if err != nil {
			return err
		}
	}
	if in.Target != "slots" {
		if in.ConnectionID != "" {
			out["queuesReset"], err = h.Queues.ResetConnection(ctx, in.ConnectionID)
		} else {
			out["queuesReset"], err = h.Queues.Reset(ctx)
		}
		if err != nil {
			return err
		}
	}
	h.audit(c, "concurrency.reset", "target", in.Target)
	return writeAPIJSON(c, http.StatusOK, out)
}

type leaseJSON struct {
	ID             string            `json:"id"`
	APIKey         map[string]string `json:"apiKey"`
	Provider       string            `json:"provider"`
	ConnectionID   string            `json:"connectionId"`
	ConnectionName string            `json:"connectionName"`
	Generation     int64             `json:"generation"`
	State          string            `json:"state"`
	AcquiredAt     string            `json:"acquiredAt"`
	RenewedAt      string            `json:"renewedAt"`
	ExpiresAt      string            `json:"expiresAt"`
	RemainingMs    int64             `json:"remainingMs"`
}

// ListLeases answers GET /api/resilience/leases[?state=active|all]. Only
// active leases are listed; ended rows stay in the database for audit.
func (h *TrafficAPI) ListLeases(c echo.Context) error {
	if st := c.QueryParam("state"); st != "" && st != "active" && st != "all" {
		return services.Invalid("state", "Use active or all.")
	}
	now := h.Clock.Now()
	snap := h.Status.Snapshot()
	names := snap.Names()
	items := []leaseJSON{}
	for _, l := range h.Leases.Active() {
		k, _ := h.Keys.Get(c.Request().Context(), l.KeyID)
		items = append(items, leaseJSON{ID: l.ID, APIKey: map[string]string{"id": k.ID, "name": k.Name, "prefix": k.Prefix},
			Provider: l.Provider, ConnectionID: l.ConnectionID, ConnectionName: names[l.ConnectionID], Generation: l.Generation,
			State: string(l.State), AcquiredAt: apiInstant(l.AcquiredAt), RenewedAt: apiInstant(l.RenewedAt),
			ExpiresAt: apiInstant(l.ExpiresAt), RemainingMs: l.ExpiresAt.Sub(now).Milliseconds()})
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
}

// DeleteLease answers DELETE /api/resilience/leases/{id}: the active lease
// ends with reason admin_ended.
func (h *TrafficAPI) DeleteLease(c echo.Context) error {
	for _, l := range h.Leases.Active() {
		if l.ID == c.Param("id") {
			if _, err := h.Leases.Invalidate(c.Request().Context(), l.ConnectionID, leases.ReasonAdminEnded); err != nil {
				return err
			}
			h.audit(c, "lease.end", "id", l.ID)
			return writeAPIJSON(c, http.StatusOK, map[string]string{"id": l.ID, "state": "invalidated", "endReason": leases.ReasonAdminEnded})
		}
	}
	return services.ErrNotFound
}

// ClearAffinity answers DELETE /api/resilience/affinity: every pin dropped.
func (h *TrafficAPI) ClearAffinity(c echo.Context) error {
	n, err := h.Pins.ClearAll(c.Request().Context())
	if err != nil {
		return err
	}
	h.audit(c, "affinity.clear")
	return writeAPIJSON(c, http.StatusOK, map[string]int{"pinsCleared": n})
}
