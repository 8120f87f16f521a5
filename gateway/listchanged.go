package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/mcp/sse"
	"github.com/mcpgate/mcpgate/policy"
)

// notifications/tools/list_changed pushed to clients: when pinning or
// rights change, notifications/tools/list_changed goes out on open
// subscriptions/listen streams.
//
// With the catalog on, tools/list is answered by mcpgate, so an
// upstream's own announcement no longer covers every change a client
// should hear of: a pin changed by SIGHUP, a tool hidden by drift or
// approved again, a declaration or policy reloaded, a person's rights
// changed at the rights source. mcpgate therefore keeps every open
// notification stream it relays — a 2026-07-28 subscriptions/listen
// stream whose filter asks for toolsListChanged, or an older revision's
// GET stream — with a fingerprint of the tools its principal saw, and
// announces notifications/tools/list_changed on it when the tools that
// principal would be listed now differ. It checks the streams of an
// upstream when the catalog, the manifest or the policy changes
// (Pipeline.ToolsChanged), and every stream every ListChangedCheck
// (Pipeline.WatchToolLists), re-authenticating the stream's request so
// the live rights are current.
//
// Delivery. The standalone proxy writes the event at once, between two
// upstream events (EventRewriter.Wake). Under Envoy the ext_proc server
// can only answer the ProcessingRequests Envoy sends: a response-body
// message exists only when the upstream sends a chunk, so the event
// waits for the upstream's next chunk on that stream (any event, or the
// end of the stream) and is sent in front of nothing, after that chunk's
// events. An upstream that sends nothing on an idle stream delays the
// announcement until it does; clients of such a deployment see the change
// on their next tools/list (whose ttlMs is the rights staleness bound).
//
// Order and de-duplication. On a subscriptions/listen stream nothing is
// announced before the upstream's notifications/subscriptions/acknowledged
// has been relayed (MCP 2026-07-28: the acknowledgement comes first), and
// the announcement carries the stream's subscription id in
// _meta["io.modelcontextprotocol/subscriptionId"]. Two list_changed
// notifications are never relayed back to back on one stream: mcpgate's
// own is dropped when the last event was the upstream's, and the
// upstream's is dropped when the last event was mcpgate's.

// MetricListChangedSent counts the list_changed notifications mcpgate
// sent on clients' notification streams, by transport.
const MetricListChangedSent = "mcpgate_list_changed_sent_total" // counter{transport}

// DefaultListChangedCheck is how often WatchToolLists rechecks every
// open stream when the caller gives no interval.
const DefaultListChangedCheck = 10 * time.Second

func newListChangedMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricListChangedSent,
		Help: "notifications/tools/list_changed (on virtual servers also prompts/ and resources/list_changed) mcpgate sent on clients' notification streams (subscriptions/listen, older revisions' GET streams) because what their principal is listed changed, by transport (proxy, extproc).",
	}, []string{"transport"})
	c.WithLabelValues(TransportProxy)
	c.WithLabelValues(TransportExtProc)
	reg.MustRegister(c)
	return c
}

func (m *Metrics) listChangedSent(transport string) {
	if m == nil || m.listChanged == nil {
		return
	}
	m.listChanged.WithLabelValues(transport).Inc()
}

// watchedList is a list whose changes mcpgate announces on a watched
// stream: tools on every route with the catalog; prompts and resources
// (with templates) on a federated route, whose lists mcpgate answers.
type watchedList struct {
	method string // the notification
	filter string // the subscriptions/listen filter asking for it
}

const (
	listTools = iota
	listPrompts
	listResources
	nLists
)

var watchedLists = [nLists]watchedList{
	listTools:     {methodToolsListChanged, "toolsListChanged"},
	listPrompts:   {"notifications/prompts/list_changed", "promptsListChanged"},
	listResources: {"notifications/resources/list_changed", "resourcesListChanged"},
}

const (
	methodToolsListChanged = "notifications/tools/list_changed"
	methodSubscriptionsAck = "notifications/subscriptions/acknowledged"
	// subscriptionIDKey is the _meta key of a notification delivered on a
	// subscriptions/listen stream (MCP 2026-07-28 NotificationMetaObject).
	subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"
)

// listHub holds the open notification streams.
type listHub struct {
	mu      sync.Mutex
	streams map[*listStream]struct{}
	// listed is the fingerprint of the last tools/list answered per
	// connection and upstream: a stream opened after it announces a
	// difference at once. Bounded by maxListed (then started over).
	listed map[listedKey]string
}

type listedKey struct{ connection, upstream string }

// maxListed bounds listHub.listed.
const maxListed = 10000

// listStream is one open notification stream.
type listStream struct {
	x     *Exchange
	subID jsontext.Value // the subscriptions/listen request's id; nil for a GET stream
	wake  chan struct{}  // signalled (capacity 1) when an announcement is pending

	// watch says which lists (watchedLists) are announced on the stream.
	watch [nLists]bool

	mu       sync.Mutex
	acked    bool           // the subscription's acknowledgement was relayed (GET streams: true)
	baseline [nLists]string // fingerprint of each list last announced or listed
	pending  [nLists]bool   // an announcement waits to be sent
	lastLC   [nLists]bool   // the last event relayed was this list's list_changed
	checking bool           // a recheck runs
	again    bool           // another recheck was asked for while one ran
}

func (h *listHub) add(s *listStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams == nil {
		h.streams = map[*listStream]struct{}{}
	}
	h.streams[s] = struct{}{}
}

func (h *listHub) remove(s *listStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, s)
}

func (h *listHub) snapshot(upstream string) []*listStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*listStream, 0, len(h.streams))
	for s := range h.streams {
		if upstream == "" || s.x.req.Upstream == upstream || (s.x.fed != nil && s.x.fed.has(upstream)) {
			out = append(out, s)
		}
	}
	return out
}

func (h *listHub) setListed(k listedKey, fp string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listed == nil || len(h.listed) >= maxListed {
		h.listed = map[listedKey]string{}
	}
	h.listed[k] = fp
}

func (h *listHub) lastListed(k listedKey) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fp, ok := h.listed[k]
	return fp, ok
}

// OpenStreams returns the number of notification streams mcpgate watches
// for tool list changes now.
func (p *Pipeline) OpenStreams() int {
	p.lists.mu.Lock()
	defer p.lists.mu.Unlock()
	return len(p.lists.streams)
}

// pushesListChanged reports whether the pipeline announces tool list
// changes itself: only with the catalog on (tools/list is its answer).
func (p *Pipeline) pushesListChanged() bool { return p.opts.Catalog != nil }

// ToolsChanged makes the pipeline check, in the background, the open
// notification streams of upstream ("" for every upstream) and announce
// notifications/tools/list_changed on those whose principal's tools
// changed. internal/app calls it when the catalog lists a change, the
// manifest is reloaded or the policy reloads. It never blocks.
func (p *Pipeline) ToolsChanged(upstream string) {
	if !p.pushesListChanged() {
		return
	}
	streams := p.lists.snapshot(upstream)
	if len(streams) == 0 {
		return
	}
	go func() {
		for _, s := range streams {
			p.recheck(s)
		}
	}()
}

// WatchToolLists rechecks every open notification stream every interval
// (DefaultListChangedCheck when 0) until ctx ends: rights changed at the
// rights source and tokens changed in the store have no event of their
// own. Negative: return at once.
func (p *Pipeline) WatchToolLists(ctx context.Context, interval time.Duration) {
	if interval < 0 || !p.pushesListChanged() {
		return
	}
	if interval == 0 {
		interval = DefaultListChangedCheck
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, s := range p.lists.snapshot("") {
				if ctx.Err() != nil {
					return
				}
				p.recheck(s)
			}
		}
	}
}

// recheckTimeout bounds one stream's recheck (authentication, live
// rights, policy).
const recheckTimeout = 10 * time.Second

// recheck computes the tools the stream's principal would be listed now
// and marks an announcement pending when they differ from the baseline.
// A stream whose credential no longer authenticates is left alone: its
// next request is refused anyway. A recheck asked for while one runs is
// not lost: the running one checks once more when it ends (a change that
// came after it had read the lists would otherwise wait for the next
// periodic check).
func (p *Pipeline) recheck(s *listStream) {
	s.mu.Lock()
	if s.checking {
		s.again = true
		s.mu.Unlock()
		return
	}
	s.checking = true
	s.mu.Unlock()
	for {
		p.recheckOnce(s)
		s.mu.Lock()
		if !s.again {
			s.checking = false
			s.mu.Unlock()
			return
		}
		s.again = false
		s.mu.Unlock()
	}
}

// recheckOnce is one recheck of s.
func (p *Pipeline) recheckOnce(s *listStream) {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	pr := s.x.input.Principal
	if a := p.opts.Authenticator; a != nil {
		fresh, f := a.Authenticate(ctx, s.x.routeRequest())
		if f != nil || fresh == nil {
			p.log.LogAttrs(ctx, slog.LevelDebug, "notification stream's credential no longer authenticates; not rechecked", slog.String("upstream", s.x.req.Upstream))
			return
		}
		pr = *fresh
	}
	fps, ok := p.listFingerprints(ctx, s.x, pr, s.watch)
	if !ok {
		return
	}
	changed := false
	s.mu.Lock()
	for k := range fps {
		if s.watch[k] && fps[k] != s.baseline[k] {
			s.baseline[k], s.pending[k], changed = fps[k], true, true
		}
	}
	s.mu.Unlock()
	if changed {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// listFingerprints are the fingerprints of the lists watch names that
// principal pr would get on the stream's route now (toolsFingerprint,
// itemsFingerprint). ok is false when the tools' cannot be computed.
func (p *Pipeline) listFingerprints(ctx context.Context, sx *Exchange, pr policy.Principal, watch [nLists]bool) (fps [nLists]string, ok bool) {
	if fps[listTools], ok = p.toolsFingerprint(ctx, sx, pr); !ok {
		return fps, false
	}
	for _, k := range []int{listPrompts, listResources} {
		if watch[k] {
			fps[k] = p.itemsFingerprint(ctx, sx, pr, k)
		}
	}
	return fps, true
}

// itemsFingerprint is a digest of the prompts (kind listPrompts) or
// resources and resource templates (listResources) a federated route
// lists principal pr now: each member's items the policy shows, as the
// member lists them (federatedList); a member that cannot be listed
// counts as an empty list.
func (p *Pipeline) itemsFingerprint(ctx context.Context, sx *Exchange, pr policy.Principal, kind int) string {
	lists := []string{"prompts"}
	if kind == listResources {
		lists = []string{"resources", "resourceTemplates"}
	}
	h := sha256.New()
	for _, list := range lists {
		method := "prompts/list"
		if list == "resources" {
			method = "resources/list"
		} else if list == "resourceTemplates" {
			method = "resources/templates/list"
		}
		rx := &Exchange{ctx: ctx, p: p, req: sx.routeRequest(), version: sx.version, label: method,
			msg: &mcp.Message{Kind: mcp.KindRequest, Method: method}}
		rx.input.Transport = sx.input.Transport
		rx.input.Message = policy.Message{Kind: "request", Method: method, Client: sx.input.Message.Client}
		rx.input.Principal = pr
		for _, m := range sx.fed.members {
			h.Write([]byte{1})
			if p.opts.Members == nil {
				continue
			}
			items, err := p.opts.Members.Items(ctx, m.Upstream, list)
			if err != nil {
				continue
			}
			kept, err := rx.forMember(m.Upstream).visibleItems(ctx, list, items)
			if err != nil {
				continue
			}
			for _, it := range kept {
				h.Write([]byte{0})
				h.Write(it)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// toolsFingerprint is a digest of the tools/list answer principal pr
// would get from the stream's upstream now: each visible tool's name,
// definition hash and effect, in order. ok is false when it cannot be
// computed (catalog not loaded, policy failed).
func (p *Pipeline) toolsFingerprint(ctx context.Context, sx *Exchange, pr policy.Principal) (string, bool) {
	if sx.fed == nil {
		return p.upstreamFingerprint(ctx, sx, sx.req, pr)
	}
	// A federated route: every member's, a member not listed counting as
	// a list of its own (its tools are left out of tools/list).
	parts := make([]string, len(sx.fed.members))
	for i, m := range sx.fed.members {
		r := *sx.routeRequest()
		r.Upstream = m.Upstream
		if fp, ok := p.upstreamFingerprint(ctx, sx, &r, pr); ok {
			parts[i] = fp
		}
	}
	return combineFingerprints(parts), true
}

// combineFingerprints is the fingerprint of a federated route's tools/list
// from its members' (in member order; "" for a member not listed).
func combineFingerprints(parts []string) string {
	h := sha256.New()
	for _, fp := range parts {
		h.Write([]byte(fp))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// upstreamFingerprint is toolsFingerprint for the upstream of r.
func (p *Pipeline) upstreamFingerprint(ctx context.Context, sx *Exchange, r *Request, pr policy.Principal) (string, bool) {
	tools, loaded := p.opts.Catalog.Tools(r.Upstream)
	if !loaded {
		return "", false
	}
	rx := &Exchange{ctx: ctx, p: p, req: r, version: sx.version, label: "tools/list",
		msg: &mcp.Message{Kind: mcp.KindRequest, Method: "tools/list"}}
	rx.input.Transport = sx.input.Transport
	rx.input.Transport.Upstream = r.Upstream
	rx.input.Message = policy.Message{Kind: "request", Method: "tools/list", Client: sx.input.Message.Client}
	rx.input.Principal = pr
	items, visible, ok := p.visibleTools(ctx, rx, tools)
	if !ok {
		return "", false
	}
	return fingerprint(tools, items, visible, pr.Toolset), true
}

// visibleTools asks the policy which catalog tools x's caller sees (phase
// "list"): the items given to it and the visible names. ok is false when
// the policy refused or failed (then nothing is visible). tools/list
// (listAnswer) and the list_changed fingerprint of a stream both ask here,
// so the two see the same items and agree.
func (p *Pipeline) visibleTools(ctx context.Context, x *Exchange, tools []CatalogTool) ([]policy.Item, map[string]bool, bool) {
	items := make([]policy.Item, len(tools))
	for i := range tools {
		t := p.tool(x.req.Upstream, tools[i].Name)
		t.Catalog = catalogEntry(&tools[i])
		if _, _, err := p.toolSchemas(x.req.Upstream, &tools[i]); err != nil {
			t.Catalog.State = policy.CatalogUnusable
		}
		items[i] = policy.Item{Name: tools[i].Name, Tool: t}
	}
	d := p.decide(ctx, x, policy.PhaseList, items)
	visible := make(map[string]bool, len(d.Visible))
	if d.Allow {
		for _, n := range d.Visible {
			visible[n] = true
		}
	}
	return items, visible, d.Allow
}

// fingerprint digests the visible tools as listed.
func fingerprint(tools []CatalogTool, items []policy.Item, visible map[string]bool, toolset string) string {
	h := sha256.New()
	h.Write([]byte(toolset))
	for i := range tools {
		if !visible[tools[i].Name] {
			continue
		}
		h.Write([]byte{0})
		h.Write([]byte(tools[i].Name))
		h.Write([]byte{0})
		h.Write([]byte(tools[i].Hash))
		h.Write([]byte{0})
		if items[i].Tool != nil {
			h.Write([]byte(items[i].Tool.Effect))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recordListed notes the fingerprint of a tools/list answer for the
// caller's connection (listAnswer), so that a stream opened later starts
// from what the client saw.
func (p *Pipeline) recordListed(x *Exchange, fp string) {
	if c := x.input.Principal.Connection; c != "" && p.pushesListChanged() {
		p.lists.setListed(listedKey{c, x.routeRequest().Upstream}, fp)
	}
}

// openListStream registers x's notification stream, if mcpgate announces
// tool list changes on it: a GET stream of an older revision, or a
// subscriptions/listen stream whose filter asks for toolsListChanged. The
// baseline is what the principal sees now; when the connection's last
// tools/list showed something else, an announcement is pending at once.
func (p *Pipeline) openListStream(ctx context.Context, x *Exchange) *listStream {
	if !x.watchTools || !p.pushesListChanged() {
		return nil
	}
	s := &listStream{x: x, wake: make(chan struct{}, 1)}
	kinds := listTools + 1 // the lists mcpgate answers on this route
	if x.fed != nil {
		kinds = nLists
	}
	if x.msg != nil && x.msg.Method == "subscriptions/listen" {
		var params struct {
			Notifications map[string]any `json:"notifications"`
		}
		if err := json.Unmarshal(x.msg.Params, &params, json.RejectUnknownMembers(false)); err != nil {
			return nil
		}
		asked := false
		for k := range kinds {
			// Only what the client opted in to: MCP forbids the rest.
			s.watch[k] = params.Notifications[watchedLists[k].filter] == true
			asked = asked || s.watch[k]
		}
		if !asked {
			return nil
		}
		s.subID = x.msg.ID
	} else {
		for k := range kinds {
			s.watch[k] = true
		}
		s.acked = true
	}
	fps, ok := p.listFingerprints(ctx, x, x.input.Principal, s.watch)
	if !ok {
		return nil
	}
	s.baseline = fps
	if c := x.input.Principal.Connection; c != "" && s.watch[listTools] {
		if last, ok := p.lists.lastListed(listedKey{c, x.routeRequest().Upstream}); ok && last != fps[listTools] {
			s.pending[listTools] = true
		}
	}
	p.lists.add(s)
	x.ls = s
	return s
}

// closeListStream forgets x's stream (Exchange.End).
func (p *Pipeline) closeListStream(x *Exchange) {
	if x.ls != nil {
		p.lists.remove(x.ls)
	}
}

// observe notes an event the rewriter relays on a watched stream:
// the subscription's acknowledgement (rewritten to include the watched
// lists' filters when the upstream left them out: mcpgate answers those
// lists and honours them), and list_changed notifications of the watched
// lists. It returns the data to relay instead (nil: unchanged) and
// whether to drop the event (a list_changed right after the same).
func (s *listStream) observe(data []byte) (out []byte, drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := -1
	for k, w := range watchedLists {
		if s.watch[k] && bytes.Contains(data, []byte(w.method)) {
			kind = k
			break
		}
	}
	isAck := kind < 0 && bytes.Contains(data, []byte(methodSubscriptionsAck))
	last := s.lastLC
	s.lastLC = [nLists]bool{}
	if kind < 0 && !isAck {
		return nil, false
	}
	msg, perr := mcp.Parse(data, s.x.p.opts.MaxJSONDepth)
	if perr != nil || msg.Kind != mcp.KindNotification {
		return nil, false
	}
	switch {
	case kind >= 0 && msg.Method == watchedLists[kind].method:
		if last[kind] {
			s.lastLC = last
			return nil, true
		}
		s.lastLC[kind], s.pending[kind] = true, false
		return nil, false
	case msg.Method == methodSubscriptionsAck:
		s.acked = true
		return ackWithLists(data, msg, s.watch), false
	}
	return nil, false
}

// ackWithLists returns the acknowledgement with the filters of the
// watched lists (notifications.toolsListChanged, …) set true, nil when
// they already are or it cannot be rewritten (then relayed as it is).
func ackWithLists(body []byte, msg *mcp.Message, watch [nLists]bool) []byte {
	notes, ok, err := member(msg.Params, "notifications")
	if err != nil || !ok || notes.Kind() != '{' {
		return nil
	}
	changed := false
	for k, w := range watchedLists {
		if !watch[k] {
			continue
		}
		if v, ok, _ := member(notes, w.filter); ok && string(v) == "true" {
			continue
		}
		if notes, err = withMember(notes, w.filter, jsontext.Value("true")); err != nil {
			return nil
		}
		changed = true
	}
	if !changed {
		return nil
	}
	params, err := withMember(msg.Params, "notifications", notes)
	if err != nil {
		return nil
	}
	out, err := withMember(body, "params", params)
	if err != nil {
		return nil
	}
	return out
}

// announcements returns the SSE events to send now (one per list whose
// change is due), nil when none is due.
func (s *listStream) announcements() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.acked {
		return nil
	}
	var out [][]byte
	for k, w := range watchedLists {
		if !s.pending[k] {
			continue
		}
		s.pending[k] = false
		if s.lastLC[k] {
			continue // the upstream's own came right before
		}
		data := []byte(`{"jsonrpc":"2.0","method":"` + w.method + `"}`)
		if s.subID != nil {
			data = []byte(`{"jsonrpc":"2.0","method":"` + w.method + `","params":{"_meta":{"` + subscriptionIDKey + `":` + string(s.subID) + `}}}`)
		}
		out = append(out, sse.AppendEvent(nil, sse.Event{Type: "message", HasData: true, Data: data}))
		s.lastLC = [nLists]bool{}
		s.lastLC[k] = true
	}
	return out
}

// Wake returns a channel that is signalled when the rewriter has an
// event of its own to send (see Pending); nil when it never has. The
// standalone proxy waits on it beside the upstream's next chunk.
func (w *EventRewriter) Wake() <-chan struct{} {
	if w.ls == nil {
		return nil
	}
	return w.ls.wake
}

// Pending emits the events mcpgate adds to the stream on its own (a
// notifications/tools/list_changed announcement), if any is due.
// ResponseEvents calls it after each upstream chunk and when Wake was
// signalled; it must not run concurrently with Write or Flush.
func (w *EventRewriter) Pending(emit func([]byte) error) error {
	if w.ls == nil || w.failed {
		return nil
	}
	for _, ev := range w.ls.announcements() {
		w.x.p.m.listChangedSent(w.x.req.Transport)
		w.x.p.log.LogAttrs(w.ctx, slog.LevelDebug, "announced a list change", slog.String("upstream", w.x.req.Upstream))
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}
