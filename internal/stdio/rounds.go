package stdio

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Multi-round requests (revision 2026-07-28, SEP-2322). A 2026-07-28
// client answers no requests of the server on the exchange of its call;
// instead the server answers the call with an input_required result
// (inputRequests and an opaque requestState) and the client calls again
// with inputResponses and the same requestState. The child speaks an
// older revision and sends elicitation/create, sampling/createMessage or
// roots/list while it works on the call, so the bridge turns each such
// request into a round: the call's exchange ends with an input_required
// result, the call stays on the child (parked), and the client's retry
// answers the child's request and takes the call over.

// roundTTL is how long a parked call waits for the client's retry; then
// the child's request gets a JSON-RPC error.
const roundTTL = 10 * time.Minute

// A child may send several requests for one call at once (the Go SDK
// fulfils a handler's input requests concurrently): requests that follow
// the first within roundGather join its round, up to maxInputs.
const (
	roundGather = 25 * time.Millisecond
	maxInputs   = 8
)

// statePrefix starts every requestState the bridge issues; one without it
// is the child's own and goes to the child.
const statePrefix = "mcpgate-stdio-"

// round is a parked call waiting for the client's retry.
type round struct {
	bid   string
	cl    *call
	timer *time.Timer
}

// capabilityOf names the client capability a request of the server needs.
var capabilityOf = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// askRound makes the child's request msg an input request of call cl's
// next round; it returns why it cannot ("" when it did). The caller holds
// b.mu.
func (c *child) askRound(cl *call, msg []byte, m *mcp.Message) string {
	key, ok := capabilityOf[m.Method]
	if !ok {
		return "revision 2026-07-28 has no input request for it"
	}
	if value(cl.caps, key) == nil {
		return "the client did not declare the " + key + " capability"
	}
	params := m.Params
	if params == nil {
		params = []byte("{}")
	}
	name := "mcpgate-" + strconv.FormatInt(c.b.nextID.Add(1), 10)
	if cl.asked == nil {
		cl.asked = map[string][]byte{}
	}
	cl.asked[name] = bytes.Clone(m.ID)
	requests := fmt.Appendf(nil, `%q:{"method":%q,"params":%s}`, name, m.Method, params)
	select {
	case cl.input <- requests:
		return ""
	default:
		delete(cl.asked, name)
		return "the client's call already waits for another input"
	}
}

// park ends the exchange of call bid with an input_required result for
// requests and keeps the call on the child until the client's retry (or
// roundTTL). It returns the answer.
func (b *Bridge) park(c *child, bid string, cl *call, requests []byte) []byte {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	state := statePrefix + hex.EncodeToString(raw[:])
	rd := &round{bid: bid, cl: cl}
	b.mu.Lock()
	cl.parked = true
	c.rounds[state] = rd
	id := cl.origID
	rd.timer = time.AfterFunc(roundTTL, func() { c.expire(state) })
	b.mu.Unlock()
	return mcp.ResultResponse(id, fmt.Appendf(nil, `{"resultType":"input_required","inputRequests":%s,"requestState":%q}`, requests, state))
}

// expire gives up on a round whose client never came back: the child's
// requests get a JSON-RPC error and the call is forgotten.
func (c *child) expire(state string) {
	c.b.mu.Lock()
	rd := c.rounds[state]
	delete(c.rounds, state)
	c.b.mu.Unlock()
	if rd == nil {
		return
	}
	c.answerRound(rd.cl, nil)
	c.forget(rd.bid, rd.cl)
}

// answerRound answers the child's requests of cl's round from responses
// (the client's inputResponses; nil: none came), each under the child's
// own id.
func (c *child) answerRound(cl *call, responses []byte) {
	c.b.mu.Lock()
	asked := cl.asked
	cl.asked = nil
	c.b.mu.Unlock()
	for name, id := range asked {
		if res := value(responses, name); res != nil && res[0] == '{' {
			c.sendSoon(mcp.ResultResponse(id, res))
			continue
		}
		c.sendSoon(mcp.ErrorResponse(id, &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The client gave no response to input request " + name + "."}))
	}
}

// gatherInputs returns the inputRequests object of a round: first and the
// requests that join it within roundGather.
func gatherInputs(cl *call, first []byte) []byte {
	members := [][]byte{first}
	t := time.NewTimer(roundGather)
	defer t.Stop()
	for len(members) < maxInputs {
		select {
		case more := <-cl.input:
			members = append(members, more)
		case <-t.C:
			return append(append([]byte("{"), bytes.Join(members, []byte(","))...), '}')
		}
	}
	return append(append([]byte("{"), bytes.Join(members, []byte(","))...), '}')
}

// resume handles a 2026-07-28 retry that carries a requestState (state,
// raw JSON) the bridge issued: the parked call takes the new exchange,
// the child gets the client's inputResponses, and the call goes on; one
// whose round expired is refused. It returns false for a requestState the
// bridge did not issue (the child's own), which the caller relays.
func (b *Bridge) resume(w http.ResponseWriter, r *http.Request, c *child, body []byte, m *mcp.Message, state []byte) bool {
	var token string
	if json.Unmarshal(state, &token) != nil || !strings.HasPrefix(token, statePrefix) {
		return false
	}
	b.mu.Lock()
	rd := c.rounds[token]
	delete(c.rounds, token)
	if rd != nil {
		rd.timer.Stop()
		rd.cl.origID = bytes.Clone(m.ID)
		rd.cl.parked = false
	}
	b.mu.Unlock()
	if rd == nil {
		writeJSON(w, http.StatusBadRequest, mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "params.requestState names no waiting round (it expired, was used, or the server restarted); call again without it"}))
		return true
	}
	b.log.Debug("input_required round resumed", slog.String("method", m.Method))
	c.answerRound(rd.cl, value(body, "params", "inputResponses"))
	b.await(w, r, c, rd.bid, rd.cl, m.Method, nil) // 2026-07-28: no session
	return true
}
