package services

import (
	"strings"
	"testing"
)

// Unknown auto.weights factor names are rejected on save (30-routing §10.14).
func TestComboConfigRejectsUnknownAutoFactor(t *testing.T) {
	_, errs := DecodeComboConfig(map[string]any{"auto": map[string]any{"weights": map[string]any{"quota": 1.0, "vibes": 2.0}}})
	if msg := errs["auto.weights"]; !strings.Contains(msg, "unknown factor 'vibes'") {
		t.Fatalf("errors %v", errs)
	}
	if _, errs := DecodeComboConfig(map[string]any{"auto": map[string]any{"weights": map[string]any{"quota": 1.0, "health": 0.5}}}); len(errs) != 0 {
		t.Fatalf("known factors refused: %v", errs)
	}
}
