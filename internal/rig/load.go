package rig

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol is the MCP revision the load speaks.
const Protocol = "2026-07-28"

// CallBody is a 2026-07-28 tools/call of tool with the JSON arguments args.
func CallBody(id int, tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + tool +
		`","arguments":` + args + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + Protocol +
		`","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p` + strconv.Itoa(id) + `"}}}`)
}

// NewCall builds the HTTP request of a tools/call with the headers the
// 2026-07-28 revision requires; token may be "" (direct to the upstream).
func NewCall(ctx context.Context, url, token string, id int, tool, args string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(CallBody(id, tool, args)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", Protocol)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// LoadOptions configure Load.
type LoadOptions struct {
	URL         string
	Tokens      []string // client i uses Tokens[i%len]; none: no Authorization
	Concurrency int
	Calls       int           // total calls, shared by the clients
	Timeout     time.Duration // bound on one call (default 30s)
	// DistinctArgs gives every call its own arguments ({"service":"db-<n>"})
	// instead of the same {"service":"db"}, as real agents do: the
	// decision memo answers only a policy that reads none of their values,
	// as the default policy (policy/reads.go).
	DistinctArgs bool
	// FirstID numbers the calls (JSON-RPC ids, distinct arguments) from
	// FirstID+1, so that successive loads against one target do not repeat
	// each other's arguments.
	FirstID int
}

// LoadResult is what Load measured.
type LoadResult struct {
	Calls     int
	Failed    int
	FirstFail string // the first failure, for the report
	Elapsed   time.Duration
	Latencies []time.Duration // sorted, one per successful call
}

// Throughput is successful calls per second.
func (r LoadResult) Throughput() float64 {
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile latency (0 < p ≤ 100).
func (r LoadResult) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies))*p/100+0.5) - 1
	return r.Latencies[min(max(i, 0), len(r.Latencies)-1)]
}

// Add merges b, a later load, into r: calls, failures and latencies are
// summed, the elapsed times added.
func (r *LoadResult) Add(b LoadResult) {
	r.Calls += b.Calls
	r.Failed += b.Failed
	if r.FirstFail == "" {
		r.FirstFail = b.FirstFail
	}
	r.Elapsed += b.Elapsed
	r.Latencies = append(r.Latencies, b.Latencies...)
	slices.Sort(r.Latencies)
}

// Load runs Calls get_status calls from Concurrency clients, each with one
// call in flight over its own kept-alive connection, and checks each
// answer: HTTP 200 and a successful tool result. Anything else counts as a
// failed request.
func Load(ctx context.Context, o LoadOptions) LoadResult {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	var next atomic.Int64
	var mu sync.Mutex
	res := LoadResult{Calls: o.Calls}
	var wg sync.WaitGroup
	start := time.Now()
	for c := range o.Concurrency {
		token := ""
		if len(o.Tokens) > 0 {
			token = o.Tokens[c%len(o.Tokens)]
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			var lat []time.Duration
			var failed int
			var first string
			for {
				i := int(next.Add(1))
				if i > o.Calls || ctx.Err() != nil {
					break
				}
				n := o.FirstID + i
				cctx, cancel := context.WithTimeout(ctx, o.Timeout)
				t0 := time.Now()
				args := `{"service":"db"}`
				if o.DistinctArgs {
					args = `{"service":"db-` + strconv.Itoa(n) + `"}`
				}
				err := call(client, NewCall(cctx, o.URL, token, n, ToolGetStatus, args))
				d := time.Since(t0)
				cancel()
				if err != nil {
					failed++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				lat = append(lat, d)
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, lat...)
			res.Failed += failed
			if res.FirstFail == "" {
				res.FirstFail = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	return res
}

func call(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !IsResult(body) {
		return fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)
	}
	return nil
}
