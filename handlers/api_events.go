package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/events"
)

// EventsAPI serves GET /api/resilience/events: the Runtime page's Recent
// events (50-dashboard §6.8) for scripts. The list is this replica's.
type EventsAPI struct {
	*API
	Status    StatusReader
	Catalogue Catalogue
	Events    EventReader
}

// eventJSON is one event: type, time, subject (display names resolved now)
// and cause, plus the ids it concerns and, for an admin's action, who.
type eventJSON struct {
	Type         events.Type `json:"type"`
	At           string      `json:"at"`
	Subject      string      `json:"subject"`
	Cause        string      `json:"cause"`
	Status       int         `json:"status,omitempty"`
	Provider     string      `json:"provider,omitempty"`
	ConnectionID string      `json:"connectionId,omitempty"`
	Model        string      `json:"model,omitempty"`
	LeaseID      string      `json:"leaseId,omitempty"`
	Target       string      `json:"target,omitempty"`
	// Actor names the admin whose request caused the event.
	Actor string `json:"actor,omitempty"`
}

// List answers GET /api/resilience/events: {"events": [...]}, newest first.
func (h *EventsAPI) List(c echo.Context) error {
	snap := h.Status.Snapshot()
	names := eventNames(&snap, h.Catalogue)
	out := []eventJSON{}
	if h.Events != nil {
		for _, e := range h.Events.Snapshot() {
			if e.Provider == "" {
				e.Provider = names.ProviderOf[e.ConnectionID]
			}
			out = append(out, eventJSON{Type: e.Type, At: apiInstant(e.At), Cause: e.Cause, Status: e.Status,
				Subject:  e.Subject(names.Providers[e.Provider], names.Connections[e.ConnectionID]),
				Provider: e.Provider, ConnectionID: e.ConnectionID, Model: e.Model, LeaseID: e.LeaseID, Target: e.Target, Actor: e.Actor})
		}
	}
	return writeAPIJSON(c, http.StatusOK, map[string][]eventJSON{"events": out})
}
