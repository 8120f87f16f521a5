package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpgate/mcpgate/assertion"
)

func keysGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys generate", stderr)
	alg := fs.String("alg", assertion.DefaultAlgorithm, "signature `algorithm`: EdDSA (Ed25519) or ES256 (P-256)")
	out := fs.String("out", "", "write the key file to `FILE` (mode 0600; refuses to overwrite) instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ks, err := assertion.GenerateKeySet(*alg)
	if err != nil {
		return err
	}
	data, err := ks.MarshalPrivate()
	if err != nil {
		return err
	}
	return keysOutput(stdout, *out, data, "keys rotate", fmt.Sprintf("signing key %s (%s)", ks.SigningKeyID(), ks.SigningAlgorithm()))
}

// keysOutput writes a generated keys file to stdout, or, with out set, to
// the new file out (keysWriteNew) and says so, naming what it holds; rotate
// is the command that adds a key to an existing file.
func keysOutput(stdout io.Writer, out string, data []byte, rotate, holds string) error {
	if out == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := keysWriteNew(out, data, rotate); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s\n", out, holds)
	return nil
}

func keysRotate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys rotate", stderr)
	in := fs.String("in", "", "key `FILE` to rotate (rewritten in place)")
	alg := fs.String("alg", assertion.DefaultAlgorithm, "signature `algorithm` of the new key: EdDSA (Ed25519) or ES256 (P-256)")
	stage := fs.Bool("stage", false, "add the new key last (published, not signing); promote it later")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ks, err := keysLoad(fs.Output(), *in)
	if err != nil {
		return err
	}
	if *stage {
		next, kid, err := ks.Stage(*alg)
		if err != nil {
			return err
		}
		if err := keysReplace(*in, next); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: staged key %s (%s), published but not signing; keys: %s\n", *in, kid, *alg, strings.Join(next.KeyIDs(), ", "))
		fmt.Fprintf(stdout, "after every replica has reloaded and upstream JWKS caches have refreshed (10 minutes with the defaults), run:\n  mcpgate keys promote --in %s --kid %s\n", *in, kid)
		return nil
	}
	next, err := ks.Rotate(*alg)
	if err != nil {
		return err
	}
	if err := keysReplace(*in, next); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: new signing key %s (%s); keys: %s\n", *in, next.SigningKeyID(), next.SigningAlgorithm(), strings.Join(next.KeyIDs(), ", "))
	fmt.Fprintf(stdout, "remove %s after the assertion lifetime plus the upstreams' JWKS cache time (30 minutes with the defaults):\n  mcpgate keys remove --in %s --kid %s\n", ks.SigningKeyID(), *in, ks.SigningKeyID())
	return nil
}

func keysPromote(args []string, stdout, stderr io.Writer) error {
	return keysEdit("keys promote", "`KID` of the key that is to sign", args, stdout, stderr,
		func(ks *assertion.KeySet, kid string) (*assertion.KeySet, string, error) {
			next, err := ks.Promote(kid)
			if err != nil {
				return nil, "", err
			}
			return next, fmt.Sprintf("signing key %s (%s), was %s", next.SigningKeyID(), next.SigningAlgorithm(), ks.SigningKeyID()), nil
		})
}

func keysRemove(args []string, stdout, stderr io.Writer) error {
	return keysEdit("keys remove", "`KID` of the key to remove", args, stdout, stderr,
		func(ks *assertion.KeySet, kid string) (*assertion.KeySet, string, error) {
			next, err := ks.Remove(kid)
			return next, "removed key " + kid, err
		})
}

// keysEdit runs a verb that changes one key of a key file in place:
// --in FILE and --kid KID, then edit, then the file rewritten and one line
// saying what changed.
func keysEdit(name, kidUsage string, args []string, stdout, stderr io.Writer,
	edit func(ks *assertion.KeySet, kid string) (*assertion.KeySet, string, error)) error {
	fs := newFlagSet(name, stderr)
	in := fs.String("in", "", "key `FILE` (rewritten in place)")
	kid := fs.String("kid", "", kidUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *kid == "" {
		fmt.Fprintln(fs.Output(), "--kid is required")
		return errUsage
	}
	ks, err := keysLoad(fs.Output(), *in)
	if err != nil {
		return err
	}
	next, what, err := edit(ks, *kid)
	if err != nil {
		return err
	}
	if err := keysReplace(*in, next); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s; keys: %s\n", *in, what, strings.Join(next.KeyIDs(), ", "))
	return nil
}

func keysPublic(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys public", stderr)
	in := fs.String("in", "", "key `FILE`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ks, err := keysLoad(fs.Output(), *in)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", ks.PublicJWKS())
	return err
}

func keysLoad(usageOut io.Writer, path string) (*assertion.KeySet, error) {
	if path == "" {
		fmt.Fprintln(usageOut, "--in is required")
		return nil, errUsage
	}
	return assertion.LoadKeySet(path)
}

// keysWriteNew creates path with mode 0600 and writes data; it refuses to
// touch an existing file (naming rotate, the command that adds a key to
// one) and removes a partly written one.
func keysWriteNew(path string, data []byte, rotate string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists; not overwriting a key file (use %s to add a key)", path, rotate)
		}
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// keysReplace atomically replaces path with the private form of ks.
func keysReplace(path string, ks *assertion.KeySet) error {
	data, err := ks.MarshalPrivate()
	if err != nil {
		return err
	}
	return replaceFile(path, data)
}

// replaceFile atomically replaces path with data: a temporary file (mode
// 0600) in the same directory, synced, then renamed over path. A reader
// never sees a partial key file.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	werr := tmp.Chmod(0o600)
	if werr == nil {
		_, werr = tmp.Write(data)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
