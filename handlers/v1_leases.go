package handlers

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/leases"
)

type leaseAction struct {
	Action     string          `json:"action"`
	Model      string          `json:"model"`
	TTLMs      *int64          `json:"ttlMs"`
	Generation json.RawMessage `json:"generation"`
	Reason     string          `json:"reason"`
}

func leaseTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// maxLeaseActionBody bounds a lease action's body: a few short fields.
const maxLeaseActionBody = 64 << 10

func actionInvalid(msg string) error {
	return gwErr(leases.CodeActionInvalid, msg)
}

// SessionLeases serves POST /v1/session-leases (10-gateway-api §5.6).
func (h *V1) SessionLeases(c echo.Context) error {
	c.Response().Header().Set("X-Switchyard-Request-Id", RequestID(c))
	c.Set("sy.lease-endpoint", true) // this route needs lease:exclusive, not inference
	k, err := h.authenticate(c)
	if err != nil {
		return err
	}
	if err := leases.CheckKey(k); err != nil {
		return leaseErr(err)
	}
	if h.Leases == nil {
		return gwErr(services.CodeInternalError, "Leases are not available.")
	}
	b, p := readJSONBody(c.Response(), c.Request(), maxLeaseActionBody)
	switch p {
	case bodyOK:
	case bodyNotJSON:
		return p.gatewayError(maxLeaseActionBody)
	default: // an oversized action is as invalid as a malformed one (400, not 413)
		return actionInvalid("The body could not be read.")
	}
	owner, err := leases.ParseOwner(c.Request().Header.Get(leases.OwnerHeader))
	if err != nil {
		return leaseErr(err)
	}
	var in leaseAction
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return actionInvalid("The body is not a valid lease action: " + err.Error())
	}
	var gen int64
	if in.Action != "acquire" {
		if len(in.Generation) == 0 || json.Unmarshal(in.Generation, &gen) != nil || gen < 1 || gen > leases.MaxGeneration {
			return actionInvalid("generation must be a whole number from 1 to 2^53−1.")
		}
	}
	ttl := time.Duration(0)
	if in.TTLMs != nil {
		ttl = time.Duration(*in.TTLMs) * time.Millisecond
	}
	ctx := c.Request().Context()
	switch in.Action {
	case "acquire":
		route, gerr := gateway.Resolve(h.Gateway.Registry().Snapshot(), k, in.Model)
		if gerr != nil {
			return gerr
		}
		l, err := h.Leases.AcquireFor(ctx, k, owner, leases.Target{Provider: route.Provider.ID, Model: route.Model, Combo: route.Combo != nil}, ttl, h.Gateway)
		if err != nil {
			return leaseErr(err)
		}
		return c.JSON(200, map[string]any{"state": l.State, "generation": l.Generation, "reused": l.Reused, "ttlMs": l.TTL.Milliseconds(),
			"acquiredAt": leaseTime(l.AcquiredAt), "renewedAt": leaseTime(l.RenewedAt), "expiresAt": leaseTime(l.ExpiresAt)})
	case "renew":
		l, err := h.Leases.Renew(ctx, k, owner, gen, ttl)
		if err != nil {
			return leaseErr(err)
		}
		return c.JSON(200, map[string]any{"state": l.State, "generation": l.Generation, "ttlMs": l.TTL.Milliseconds(),
			"acquiredAt": leaseTime(l.AcquiredAt), "renewedAt": leaseTime(l.RenewedAt), "expiresAt": leaseTime(l.ExpiresAt)})
	case "release":
		reason := in.Reason
		if reason == "" {
			reason = leases.ReasonOwnerExit
		}
		l, err := h.Leases.Release(ctx, k, owner, gen, reason)
		if err != nil {
			return leaseErr(err)
		}
		return c.JSON(200, map[string]any{"state": l.State, "generation": l.Generation, "endedAt": leaseTime(l.EndedAt)})
	case "status":
		l, err := h.Leases.Status(ctx, k, owner, gen)
		if err != nil {
			return leaseErr(err)
		}
		return c.JSON(200, map[string]any{"state": l.State, "generation": l.Generation, "acquiredAt": leaseTime(l.AcquiredAt),
			"renewedAt": leaseTime(l.RenewedAt), "expiresAt": leaseTime(l.ExpiresAt),
			"connection": map[string]any{"displayName": h.connectionName(l.ConnectionID), "provider": l.Provider}})
	}
	return actionInvalid("action must be acquire, renew, release or status.")
}

// leaseErr converts a lease error into the gateway error shape.
func leaseErr(err error) error {
	var le *leases.Error
	if errors.As(err, &le) {
		return le.GatewayError()
	}
	return err
}

func (h *V1) connectionName(id string) any {
	if c, ok := h.Gateway.Registry().Snapshot().Connection(id); ok {
		return c.Name
	}
	return nil
}
