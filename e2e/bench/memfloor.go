package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/rig"
)

// memoryFloor starts libfloor (e2e/bench/libfloor: the libraries mcpgate is
// built from, started as mcpgate starts them, without mcpgate's code), has
// conc clients run 2000 policy evaluations and a few /metrics scrapes
// through it, and prints and returns its memory and the gateway's: the
// part of mcpgate's resident memory any gateway made of these parts holds.
func memoryFloor(ctx context.Context, w io.Writer, binary string, g *rig.Gateway, conc int) (gw, lf rig.Memory, err error) {
	pid, base, stop, err := startChild(binary, nil, "libfloor ready ")
	if err != nil {
		return gw, lf, err
	}
	defer stop()
	const evaluations = 2000
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= evaluations; n = next.Add(1) {
				path := "/opa"
				if n%500 == 0 {
					path = "/metrics"
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return gw, lf, fmt.Errorf("libfloor: %d of %d requests failed", n, evaluations)
	}
	if lf, err = rig.ReadMemory(pid); err != nil {
		return gw, lf, err
	}
	if gw, err = rig.ReadMemory(g.Pid()); err != nil {
		return gw, lf, err
	}
	show := func(m rig.Memory) string {
		return fmt.Sprintf("RSS %s (file %s, anon %s), peak %s", rig.MiB(m.RSS), rig.MiB(m.File), rig.MiB(m.Anon), rig.MiB(m.PeakRSS))
	}
	fmt.Fprintf(w, "\nmemory floor — e2e/bench/libfloor, the prescribed libraries started as mcpgate starts them, none of mcpgate's code, after %d policy evaluations from %d clients:\n  libfloor %s\n  mcpgate  %s\n",
		evaluations, conc, show(lf), show(gw))
	fmt.Fprintf(w, "  mcpgate − floor: RSS %s, peak %s (peak %.2f× the floor's)\n",
		rig.MiB(gw.RSS-lf.RSS), rig.MiB(gw.PeakRSS-lf.PeakRSS), float64(gw.PeakRSS)/float64(max(lf.PeakRSS, 1)))
	return gw, lf, nil
}
