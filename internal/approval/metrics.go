package approval

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/store"
)

// Metric names (Prometheus conventions: base units, _total counters,
// bounded labels).
const (
	MetricPending        = "mcpgate_approval_pending_actions"
	MetricExpired        = "mcpgate_approval_expired_actions"
	MetricDecisions      = "mcpgate_approval_decisions_total"
	MetricTimeToApproval = "mcpgate_approval_time_to_approval_seconds"
	MetricRefusals       = "mcpgate_approval_refusals_total"
	MetricWebhook        = "mcpgate_approval_webhook_deliveries_total"
)

// refusalCodes are the reason label values of MetricRefusals (others
// count as "other", keeping the label bounded).
var refusalCodes = []string{"not_signed_in", "bearer_not_accepted", "csrf", "not_found", "already_approved", "already_rejected",
	"already_decided", "expired", "own_action", "tool_undeclared", "rights_unavailable", "approver_inactive", "missing_right",
	"store_unavailable", "provider_unavailable", "sign_in_state_invalid", "sign_in_refused", "sign_in_failed", "sign_in_invalid", "other"}

type metrics struct {
	decisions *prometheus.CounterVec
	tta       prometheus.Histogram
	refusals  *prometheus.CounterVec
	webhook   *prometheus.CounterVec
}

// stateCollector reports the pending and expired out-of-band actions at
// scrape time, from the store (so every replica reports the fleet's).
type stateCollector struct {
	actions          store.ActionStore
	now              func() time.Time
	pending, expired *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.pending; ch <- c.expired }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	as, err := c.actions.ListActions(ctx, store.ActionFilter{State: store.ActionPending, Limit: store.MaxActionLimit})
	if err != nil {
		return // no sample rather than a wrong one
	}
	now := c.now()
	var pending, expired float64
	for _, a := range as {
		if a.Approval != store.ApprovalOutOfBand {
			continue
		}
		if now.Before(a.ExpiresAt) {
			pending++
		} else {
			expired++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, pending)
	ch <- prometheus.MustNewConstMetric(c.expired, prometheus.GaugeValue, expired)
}

func newMetrics(reg prometheus.Registerer, actions store.ActionStore, now func() time.Time) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDecisions,
			Help: "Decisions taken on the approval page, by decision (approved, rejected)."}, []string{"decision"}),
		tta: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricTimeToApproval,
			Help:    "Seconds from an out-of-band action's preview to its approval on the approval page.",
			Buckets: []float64{10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600}}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRefusals,
			Help: "Requests the approval page refused, by reason."}, []string{"reason"}),
		webhook: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWebhook,
			Help: "Approval webhook delivery attempts, by result (delivered, retry, failed, dropped)."}, []string{"result"}),
	}
	for _, d := range []string{"approved", "rejected"} {
		m.decisions.WithLabelValues(d)
	}
	for _, r := range refusalCodes {
		m.refusals.WithLabelValues(r)
	}
	for _, r := range []string{"delivered", "retry", "failed", "dropped"} {
		m.webhook.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.decisions, m.tta, m.refusals, m.webhook, &stateCollector{actions: actions, now: now,
			pending: prometheus.NewDesc(MetricPending, "Out-of-band actions waiting for a person's decision now (not expired).", nil, nil),
			expired: prometheus.NewDesc(MetricExpired, "Out-of-band actions that expired without a decision and are still retained (24h after expiry).", nil, nil),
		})
	}
	return m
}

func (m *metrics) refusal(code string) {
	for _, c := range refusalCodes {
		if c == code {
			m.refusals.WithLabelValues(code).Inc()
			return
		}
	}
	m.refusals.WithLabelValues("other").Inc()
}

func (m *metrics) decided(approved bool, after time.Duration) {
	if approved {
		m.decisions.WithLabelValues("approved").Inc()
		m.tta.Observe(after.Seconds())
		return
	}
	m.decisions.WithLabelValues("rejected").Inc()
}
