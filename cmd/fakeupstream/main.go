// Command fakeupstream runs the scriptable fake LLM provider of internal/fakeupstream as
// its own process, for benchmarks, process-level tests and poking at the gateway by hand:
//
//	go run ./cmd/fakeupstream --addr 127.0.0.1:0 [--script file.json] [--scenario healthy|demo|chaos]
//	    [--seed N] [--fault-rate 0.3] [--latency 60ms] [--events 20] [--event-gap 25ms]
//	    [--hitlog full|ring:N|off]
//
// The first line on stdout is "fakeupstream listening on http://HOST:PORT" (the real port when
// --addr ends in :0); scripts read it to find the server. SIGINT or SIGTERM stop it with exit 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"switchyard/internal/fakeupstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeupstream: %s\n", strings.TrimPrefix(err.Error(), "fakeupstream: "))
		os.Exit(1)
	}
}

// run is main without the process: flags in, a served fake until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakeupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address; must be loopback")
	scriptPath := fs.String("script", "", "JSON script file (see fakeupstream.ScriptFile), applied after the scenario")
	scenario := fs.String("scenario", fakeupstream.ScenarioHealthy, "healthy, demo or chaos")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule and of uniform delays")
	faultRate := fs.Float64("fault-rate", 0, "share of requests faulted, 0..1 (healthy: a seeded chaos mix when > 0)")
	latency := fs.Duration("latency", 0, "delay before headers of every answer whose step sets no delay")
	events := fs.Int("events", fakeupstream.DefaultEvents, "content events per answer")
	eventGap := fs.Duration("event-gap", 0, "pause between content events")
	hitLog := fs.String("hitlog", "full", "hit log: full, ring:N or off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	mode, err := fakeupstream.ParseHitLog(*hitLog)
	if err != nil {
		return err
	}
	if *events < 1 || *latency < 0 || *eventGap < 0 {
		return errors.New("--events must be ≥ 1, --latency and --event-gap ≥ 0")
	}
	scen, err := fakeupstream.Scenario(*scenario, *seed, *faultRate)
	if err != nil {
		return err
	}
	s := fakeupstream.New(
		fakeupstream.WithSeed(*seed),
		fakeupstream.WithLatency(*latency),
		fakeupstream.WithEvents(*events),
		fakeupstream.WithEventGap(*eventGap),
		fakeupstream.WithHitLog(mode),
	)
	if err := s.Apply(scen); err != nil {
		return err
	}
	if *scriptPath != "" {
		sf, err := fakeupstream.LoadScriptFile(*scriptPath)
		if err != nil {
			return err
		}
		if err := s.Apply(sf); err != nil {
			return err
		}
	}
	if err := s.Listen(*addr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fakeupstream listening on %s\n", s.URL())
	<-ctx.Done()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return errors.New("shutdown took longer than 10s")
	}
	return nil
}
