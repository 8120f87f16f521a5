package rig

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (proc(5)); 100 on every Linux architecture Go supports.
const clockTicks = 100

// CPUTime returns the user plus system CPU time process pid has used
// (/proc/<pid>/stat fields 14 and 15, proc(5)), in 10 ms steps.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Memory is a process's resident set now and at its peak, in bytes
// (/proc/<pid>/status VmRSS and VmHWM).
type Memory struct {
	RSS, PeakRSS int64
	// File is the part of RSS mapped from files (the executable's pages,
	// shared libraries: RssFile), Anon the process's own (heap, stacks:
	// RssAnon).
	File, Anon int64
}

// ReadMemory reads pid's Memory.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.PeakRSS
		case "RssFile":
			dst = &m.File
		case "RssAnon":
			dst = &m.Anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/%d/status %s: %q", pid, k, v)
		}
		*dst = kb << 10
	}
	if m.RSS == 0 {
		return Memory{}, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return m, nil
}

// MiB formats bytes as MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
