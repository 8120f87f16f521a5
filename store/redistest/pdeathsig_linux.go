package redistest

import "syscall"

// setParentDeathSignal makes Linux kill redis-server when the test binary
// dies without running its cleanups (a panic, a timeout, a SIGKILL).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
