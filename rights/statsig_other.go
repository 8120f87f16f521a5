//go:build !linux

package rights

import "os"

// statSig is the signature of the file at path (os.Stat and sigOf).
func statSig(path string) (fileSig, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileSig{}, err
	}
	return sigOf(fi), nil
}
