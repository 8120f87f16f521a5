package app

import (
	"context"
	"fmt"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/killswitch"
)

// startKillSwitch starts the kill switch watcher over the state store
// (none without a store: then there is no kill switch, and the admin API's
// /v1/killswitch says so) and hands it to the admin API. It fails when the
// switches cannot be read: the gateway does not start without knowing
// them.
func (a *App) startKillSwitch(ctx context.Context) error {
	if a.id.store == nil {
		a.log.Info("no state store: the kill switch is off (configure store to get it)")
		return nil
	}
	w, err := killswitch.New(ctx, killswitch.Options{Store: a.id.store, Registerer: a.reg, Logger: a.log})
	if err != nil {
		return fmt.Errorf("kill switch: %w", err)
	}
	go w.Run(ctx)
	a.switches = w
	if a.id.admin != nil {
		a.id.admin.SetKillSwitch(w)
	}
	if on, s := w.Global(); on {
		a.log.Warn("the global kill switch is ON: every MCP request is refused until it is turned off", "reason", s.Reason, "set_by", s.SetBy)
	}
	return nil
}

// gatewaySwitches is the pipeline's Options.Switches: nil (not a typed nil
// pointer) without a watcher.
func (a *App) gatewaySwitches() gateway.Switches {
	if a.switches == nil {
		return nil
	}
	return a.switches
}
