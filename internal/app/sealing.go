package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/sealing"
)

// sealingKeys holds the keys that seal the requestState of approvals
// asked through input_required (write_safety.sealing_keys_file;
// gateway/elicit.go), and rereads them on SIGHUP.
type sealingKeys struct {
	file    string // "" : a key made for this process
	sealer  *sealing.Sealer
	reloads *prometheus.CounterVec
}

// MetricSealingKeyReloads counts reloads of the sealing keys file by
// result (success, failure).
const MetricSealingKeyReloads = "mcpgate_sealing_key_reloads_total"

// newSealingKeys loads write_safety.sealing_keys_file, or makes a key for
// this process only when it is not set (logged: replicas and restarts
// then cannot open each other's requestStates, and the person is asked
// again).
func newSealingKeys(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*sealingKeys, error) {
	sk := &sealingKeys{file: cfg.WriteSafety.SealingKeysFile}
	sk.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSealingKeyReloads,
		Help: "Reloads of the sealing keys file (SIGHUP), by result.",
	}, []string{"result"})
	for _, r := range []string{"success", "failure"} {
		sk.reloads.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(sk.reloads); err != nil {
			return nil, fmt.Errorf("sealing keys: %w", err)
		}
	}
	var ks *sealing.KeySet
	var err error
	if sk.file == "" {
		if cfg.Store != nil {
			log.Warn("write_safety.sealing_keys_file is not set: approvals asked through input_required are sealed with a key made for this process only; set it (mcpgate sealing-keys generate) when running replicas, or a restart or another replica asks the person again")
		}
		ks, err = sealing.GenerateKeySet()
	} else {
		ks, err = sealing.LoadKeySet(sk.file)
	}
	if err != nil {
		return nil, fmt.Errorf("sealing keys: %w", err)
	}
	sk.sealer = sealing.NewSealer(ks)
	return sk, nil
}

// reload rereads the keys file (SIGHUP); on failure the previous keys
// stay in use. Without a keys file it does nothing.
func (sk *sealingKeys) reload(ctx context.Context, log *slog.Logger) error {
	if sk == nil || sk.file == "" {
		return nil
	}
	ks, err := sealing.LoadKeySet(sk.file)
	if err != nil {
		sk.reloads.WithLabelValues("failure").Inc()
		log.ErrorContext(ctx, "sealing keys reload failed; the previous keys stay in use", "file", sk.file, "error", err)
		return fmt.Errorf("sealing keys: %w", err)
	}
	sk.sealer.SetKeys(ks)
	sk.reloads.WithLabelValues("success").Inc()
	log.InfoContext(ctx, "sealing keys reloaded", "file", sk.file, "sealing_kid", ks.SealingKeyID(), "kids", ks.KeyIDs())
	return nil
}
