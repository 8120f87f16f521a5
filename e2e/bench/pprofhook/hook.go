//go:build mcpgate_bench_pprof

// This file is added to cmd/mcpgate by the bench's -profile flag (a build
// overlay and the mcpgate_bench_pprof tag), never to a release build. With
// MCPGATE_BENCH_PPROF set to a listen address, the gateway serves:
//
//	/cpu/start?file=F   start a CPU profile into F
//	/cpu/stop           stop it
//	/allocs?file=F      write the allocation profile (cumulative) to F
package main

import (
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

func init() {
	addr := os.Getenv("MCPGATE_BENCH_PPROF")
	if addr == "" {
		return
	}
	var mu sync.Mutex
	var cpu *os.File
	mux := http.NewServeMux()
	mux.HandleFunc("/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cpu = f
	})
	mux.HandleFunc("/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		pprof.StopCPUProfile()
		if cpu != nil {
			_ = cpu.Close()
			cpu = nil
		}
	})
	mux.HandleFunc("/allocs", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("file"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic("MCPGATE_BENCH_PPROF: " + err.Error())
	}
	go func() { _ = http.Serve(ln, mux) }()
}
