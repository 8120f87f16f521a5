package rights

import "syscall"

// statSig is the signature os.Stat and sigOf give path, read into a
// Stat_t on the stack: the same fstatat system call without the FileInfo
// os.Stat allocates. Any error (EINTR included, which os.Stat retries) is
// returned for the caller to take the os.Stat path.
func statSig(path string) (fileSig, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileSig{}, err
	}
	return fileSig{exists: true, size: st.Size, mtime: st.Mtim.Nano(), dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil // Dev and Ino differ in type by architecture
}
