package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

func ExampleAuditor() {
	dir, err := os.MkdirTemp("", "mcpgate-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(filepath.Join(dir, "state.db"), boltstore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	ctx := context.Background()
	a := store.NewAuditor(st, store.NewAuditLogger(os.Stdout))
	// ID and Time are normally left empty for the Auditor to fill.
	_, err = a.Record(ctx, store.AuditRecord{
		ID: "0001", Time: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC),
		Channel: store.ChannelMCP, Tenant: "acme", Connection: "mt_7Qk", Client: "claude-code",
		Subject: "alice", Action: "tickets.create", Outcome: "ok", DecisionID: "d-42",
		PublicIDs: map[string]string{"ticket_id": "T-1001"},
	})
	if err != nil {
		panic(err)
	}
	recs, err := st.QueryAudit(ctx, store.AuditQuery{Tenant: "acme"})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(recs), recs[0].Action, recs[0].PublicIDs["ticket_id"])
	// Output:
	// {"time":"2026-07-28T10:00:00Z","level":"INFO","msg":"audit","audit_id":"0001","channel":"mcp","tenant":"acme","connection":"mt_7Qk","client":"claude-code","subject":"alice","action":"tickets.create","outcome":"ok","decision_id":"d-42","public_ids":{"ticket_id":"T-1001"}}
	// 1 tickets.create T-1001
}
