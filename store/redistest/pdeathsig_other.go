//go:build !linux

package redistest

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
