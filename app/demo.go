package app

import (
	"context"
	"io"
)

// demoEnv is the in-process fake upstream and demo data of --demo.
type demoEnv struct {
	close func()
}

func (d *demoEnv) Close() {
	if d.close != nil {
		d.close()
	}
}

func startDemo(ctx context.Context, s *Server) (*demoEnv, error) { return &demoEnv{}, nil }

// PrintDemo prints the demo keys and a ready curl line.
func (s *Server) PrintDemo(w io.Writer, baseURL string) {}
