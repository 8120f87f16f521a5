//go:build unix

package rights

import (
	"os"
	"syscall"
)

// fileIdentity returns the device and inode of fi (their integer types
// differ by platform, hence the conversions), so that a file
// replaced by rename is noticed even when its size and time match.
func fileIdentity(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
