package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mcpgate/mcpgate/internal/sealing"
)

// sealingKeysGenerate runs `mcpgate sealing-keys generate`.
func sealingKeysGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sealing-keys generate", stderr)
	out := fs.String("out", "", "write the keys file to `FILE` (mode 0600; refuses to overwrite) instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		return err
	}
	data, err := ks.Marshal()
	if err != nil {
		return err
	}
	return keysOutput(stdout, *out, data, "sealing-keys rotate", "sealing key "+ks.SealingKeyID())
}

// sealingKeysChange runs rotate, promote or remove on the file --in.
func sealingKeysChange(verb string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sealing-keys "+verb, stderr)
	in := fs.String("in", "", "keys `FILE` (rewritten in place)")
	kid := fs.String("kid", "", "the key's `KID` (promote, remove)")
	stage := fs.Bool("stage", false, "rotate: add the new key last (opens, does not seal); promote it later")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || (verb != "rotate" && *kid == "") {
		fmt.Fprintln(stderr, "--in is required; promote and remove need --kid")
		return errUsage
	}
	ks, err := sealing.LoadKeySet(*in)
	if err != nil {
		return err
	}
	var next *sealing.KeySet
	switch {
	case verb == "rotate" && *stage:
		var staged string
		if next, staged, err = ks.Stage(); err == nil {
			defer fmt.Fprintf(stdout, "after every replica has reloaded, run:\n  mcpgate sealing-keys promote --in %s --kid %s\n", *in, staged)
		}
	case verb == "rotate":
		next, err = ks.Rotate()
	case verb == "promote":
		next, err = ks.Promote(*kid)
	default:
		next, err = ks.Remove(*kid)
	}
	if err != nil {
		return err
	}
	if err := sealingKeysReplace(*in, next); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: sealing key %s; keys: %s\n", *in, next.SealingKeyID(), strings.Join(next.KeyIDs(), ", "))
	return nil
}

// sealingKeysReplace atomically replaces path with ks (replaceFile).
func sealingKeysReplace(path string, ks *sealing.KeySet) error {
	data, err := ks.Marshal()
	if err != nil {
		return err
	}
	return replaceFile(path, data)
}
