package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mcpgate/mcpgate/internal/sealing"
)

const sealingKeysUsage = `mcpgate sealing-keys — the keys file that seals approval requests

The file (write_safety.sealing_keys_file) holds AES-256-GCM keys shared by
every gateway replica (mount it from a Secret). They seal the requestState
of approvals asked through input_required; its first key seals, every key
opens. SIGHUP rereads it.

Usage:
  mcpgate sealing-keys generate [--out FILE]
        a new keys file with one fresh key; to FILE (mode 0600, never
        overwritten) or stdout
  mcpgate sealing-keys rotate --in FILE [--stage]
        add a fresh key first: it seals from the next reload on; older keys
        still open. --stage adds it last instead (opens, does not seal);
        promote it once every replica has reloaded the file. Use --stage
        with several replicas.
  mcpgate sealing-keys promote --in FILE --kid KID
        make the key KID the sealing key
  mcpgate sealing-keys remove --in FILE --kid KID
        drop an old key once write_safety.confirm_ttl has passed since it
        stopped sealing (what it sealed no longer opens)

rotate, promote and remove rewrite FILE in place (atomically, mode 0600).
`

func cmdSealingKeys(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, sealingKeysUsage)
		return errUsage
	}
	switch args[0] {
	case "generate":
		fs := newFlagSet("sealing-keys generate", stderr)
		out := fs.String("out", "", "write the keys file to `FILE` (mode 0600; refuses to overwrite) instead of stdout")
		if err := parseFlags(fs, args[1:]); err != nil {
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
	case "rotate", "promote", "remove":
		return sealingKeysChange(args[0], args[1:], stdout, stderr)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, sealingKeysUsage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown sealing-keys command %q\n\n%s", args[0], sealingKeysUsage)
	return errUsage
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
