package config

import "github.com/mcpgate/mcpgate/internal/sealing"

// write_safety.sealing_keys_file (field WriteSafety.SealingKeysFile): the
// keys that seal the requestState mcpgate gives a client it asks for an
// approval through input_required (MCP 2026-07-28 multi-round requests;
// gateway/elicit.go). The file is a JSON set of AES-256-GCM keys
// ({"keys":[{"kty":"oct","kid":"…","alg":"A256GCM","k":"…"}]}, see
// internal/sealing), made with `mcpgate sealing-keys generate` and shared
// by every replica (mount it from a Secret). Its first key seals, every
// key opens; rotation adds a key (staged, then promoted) and later removes
// the old one, and SIGHUP rereads the file.
//
// "" (the default): a key made for this process only (a warning at
// start): approvals asked before a restart, or by another replica, are
// refused with a clear message and the person is asked again.

// validateSealing checks write_safety.sealing_keys_file: when set, the file
// must exist and hold a valid key set.
func (c *Config) validateSealing(p *problems) {
	f := c.WriteSafety.SealingKeysFile
	if f == "" {
		return
	}
	before := len(*p)
	checkFile(p, "write_safety.sealing_keys_file", f, "the sealing keys file (mcpgate sealing-keys generate)")
	if len(*p) > before {
		return
	}
	if _, err := sealing.LoadKeySet(f); err != nil {
		p.addErr("write_safety.sealing_keys_file", err, "%v", err)
	}
}
