package resilience_test

import (
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
)

// Allow answers a refused OPEN or busy HALF_OPEN breaker without its mutex,
// from what the locked path recorded. These cases change what that record
// depends on and check that Allow follows at once.

// New settings with a shorter reset apply to an OPEN breaker at the next
// Allow, although a refusal was recorded under the old settings.
func TestBreakerFastPathFollowsNewSettings(t *testing.T) {
	e := newBkEnv(t)
	e.open(t, "deepseek", services.AuthAPIKey) // OPEN at t=40 s, reset 30 s
	if ok, _, _, retry := e.br.Allow("deepseek", services.AuthAPIKey); ok || retry != 30*time.Second {
		t.Fatalf("open: ok %v retry %v, want refused with 30s", ok, retry)
	}
	e.clock.Set(bkAt(50_000))
	if ok, _, _, retry := e.br.Allow("deepseek", services.AuthAPIKey); ok || retry != 20*time.Second {
		t.Fatalf("recorded refusal: ok %v retry %v, want refused with 20s", ok, retry)
	}
	c := e.cfg[services.AuthAPIKey]
	c.ResetTimeoutMs = 5_000
	e.cfg = resilience.BreakerConfig{services.AuthAPIKey: c} // the settings hand out a new map
	if ok, probe, _, _ := e.br.Allow("deepseek", services.AuthAPIKey); !ok || !probe {
		t.Fatalf("after the reset was shortened to 5 s (10 s elapsed): ok %v probe %v, want the probe", ok, probe)
	}
}

// A released probe frees the HALF_OPEN slot for the next request.
func TestBreakerFastPathReleasedProbe(t *testing.T) {
	e := newBkEnv(t)
	e.open(t, "deepseek", services.AuthAPIKey)
	e.clock.Set(bkAt(70_001))
	ok, probe, gen, _ := e.br.Allow("deepseek", services.AuthAPIKey)
	if !ok || !probe {
		t.Fatalf("first request after reset: ok %v probe %v, want the probe", ok, probe)
	}
	for range 3 { // refused while the probe is out (recorded, then answered lock-free)
		if ok, _, _, _ := e.br.Allow("deepseek", services.AuthAPIKey); ok {
			t.Fatal("second probe admitted while the first is out")
		}
	}
	e.br.ReleaseProbe("deepseek", gen)
	if ok, probe, _, _ := e.br.Allow("deepseek", services.AuthAPIKey); !ok || !probe {
		t.Fatalf("after ReleaseProbe: ok %v probe %v, want a new probe", ok, probe)
	}
}

// The OPEN period's end moves with time: at the recorded end the probe is
// admitted, and a failed probe's new OPEN period is not answered from the
// old record.
func TestBreakerFastPathAcrossCycles(t *testing.T) {
	e := newBkEnv(t)
	e.open(t, "deepseek", services.AuthAPIKey)
	e.br.Allow("deepseek", services.AuthAPIKey) // record
	e.clock.Set(bkAt(70_000))
	ok, probe, gen, _ := e.br.Allow("deepseek", services.AuthAPIKey)
	if !ok || !probe {
		t.Fatalf("at the recorded end: ok %v probe %v, want the probe", ok, probe)
	}
	e.br.Failure("deepseek", services.AuthAPIKey, gen, true, true, true, "server_error")
	ok, _, _, retry := e.br.Allow("deepseek", services.AuthAPIKey)
	if ok || retry <= 0 || retry > 30*time.Second {
		t.Fatalf("after the failed probe: ok %v retry %v, want a new OPEN period", ok, retry)
	}
	e.clock.Advance(retry)
	if ok, probe, _, _ := e.br.Allow("deepseek", services.AuthAPIKey); !ok || !probe {
		t.Fatalf("at the new end: ok %v probe %v, want the probe", ok, probe)
	}
}
