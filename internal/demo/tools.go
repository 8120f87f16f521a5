package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool inputs. The SDK decodes arguments into these structs and ignores keys
// it does not know; the input schemas below never set additionalProperties,
// so unknown arguments pass validation too (naive by design).

type findCustomersIn struct {
	Query  string `json:"query"`
	Tenant string `json:"tenant"`
}

type getBookingIn struct {
	BookingID string `json:"booking_id"`
	Tenant    string `json:"tenant"`
}

type listTechniciansIn struct {
	Tenant string `json:"tenant"`
}

type createBookingIn struct {
	CustomerID   string `json:"customer_id"`
	TechnicianID string `json:"technician_id"`
	Start        string `json:"start"`
	Notes        string `json:"notes"`
	Tenant       string `json:"tenant"`
}

type updateBookingIn struct {
	BookingID    string  `json:"booking_id"`
	Start        *string `json:"start"`
	Notes        *string `json:"notes"`
	Status       *string `json:"status"`
	TechnicianID *string `json:"technician_id"`
	Tenant       string  `json:"tenant"`
}

type bookingIn struct {
	BookingID string `json:"booking_id"`
	Tenant    string `json:"tenant"`
}

type pageTechnicianIn struct {
	TechnicianID string `json:"technician_id"`
	Message      string `json:"message"`
	Tenant       string `json:"tenant"`
}

type muteBookingAlertsIn struct {
	BookingID string `json:"booking_id"`
	Minutes   int    `json:"minutes"`
	Tenant    string `json:"tenant"`
}

// Tool outputs that are not records.

// CustomerList is the result of find_customers.
type CustomerList struct {
	Tenant    string     `json:"tenant"`
	Query     string     `json:"query"`
	Customers []Customer `json:"customers"`
}

// TechnicianList is the result of list_technicians.
type TechnicianList struct {
	Tenant      string       `json:"tenant"`
	Technicians []Technician `json:"technicians"`
}

// Confirmation is the result of send_booking_confirmation.
type Confirmation struct {
	BookingID string `json:"booking_id"`
	MessageID string `json:"message_id"`
	To        string `json:"to"`
	Subject   string `json:"subject"`
	// Body quotes the customer's notes verbatim (third-party text).
	Body   string `json:"body"`
	Status string `json:"status"`
	SentAt string `json:"sent_at"`
}

// Page is the result of page_technician.
type Page struct {
	PageID         string `json:"page_id"`
	TechnicianID   string `json:"technician_id"`
	TechnicianName string `json:"technician_name"`
	DeliveredTo    string `json:"delivered_to"` // the technician's phone
	Message        string `json:"message"`
	Status         string `json:"status"`
	SentAt         string `json:"sent_at"`
}

// AlertMute is the result of mute_booking_alerts.
type AlertMute struct {
	BookingID        string `json:"booking_id"`
	Minutes          int    `json:"minutes"`
	AlertsMutedUntil string `json:"alerts_muted_until"`
}

// Input schema helpers. Schemas are plain JSON objects: no
// additionalProperties, so the SDK accepts unknown keys.

type props map[string]any

func object(p props, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": map[string]any(p)}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

var tenantProp = str(`Tenant to act in: "acme" or "globex". Defaults to "acme".`)

func (s *Server) registerTools() {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}

	addTool(s, &mcp.Tool{
		Name:        ToolFindCustomers,
		Description: "Search customers by name, email, phone or id (case-insensitive substring). An empty query lists every customer.",
		InputSchema: object(props{
			"query":  str("Text to search for; empty lists all customers."),
			"tenant": tenantProp,
		}),
		Annotations: readOnly,
	}, s.findCustomers)

	addTool(s, &mcp.Tool{
		Name:        ToolGetBooking,
		Description: "Get one booking with its customer and technician.",
		InputSchema: object(props{
			"booking_id": str(`Booking id, e.g. "B-1001".`),
			"tenant":     tenantProp,
		}, "booking_id"),
		Annotations: readOnly,
	}, s.getBooking)

	addTool(s, &mcp.Tool{
		Name:        ToolListTechnicians,
		Description: "List the technicians, their skills and whether they are on call.",
		InputSchema: object(props{"tenant": tenantProp}),
		Annotations: readOnly,
	}, s.listTechnicians)

	addTool(s, &mcp.Tool{
		Name:        ToolCreateBooking,
		Description: "Book a technician for a customer. Nobody is notified.",
		InputSchema: object(props{
			"customer_id":   str(`Customer id, e.g. "C-101" (see find_customers).`),
			"technician_id": str(`Technician id, e.g. "T-11" (see list_technicians).`),
			"start":         str(`Start time, RFC 3339 with offset, e.g. "2026-08-10T09:00:00+01:00".`),
			"notes":         str("Notes for the technician."),
			"tenant":        tenantProp,
		}, "customer_id", "technician_id", "start"),
	}, s.createBooking)

	addTool(s, &mcp.Tool{
		Name:        ToolUpdateBooking,
		Description: "Change a booking's start, notes, status or technician. Only the fields given change. Nobody is notified.",
		InputSchema: object(props{
			"booking_id":    str(`Booking id, e.g. "B-1001".`),
			"start":         str("New start time, RFC 3339 with offset."),
			"notes":         str("New notes (replaces the old ones)."),
			"status":        map[string]any{"type": "string", "enum": bookingStatuses, "description": "New status."},
			"technician_id": str("New technician id."),
			"tenant":        tenantProp,
		}, "booking_id"),
	}, s.updateBooking)

	addTool(s, &mcp.Tool{
		Name:        ToolSendBookingConfirmation,
		Description: "Email the customer a confirmation of the booking and mark it confirmed.",
		InputSchema: object(props{
			"booking_id": str(`Booking id, e.g. "B-1001".`),
			"tenant":     tenantProp,
		}, "booking_id"),
	}, s.sendBookingConfirmation)

	addTool(s, &mcp.Tool{
		Name:        ToolPageTechnician,
		Description: "Page a technician's phone now, day or night, with a short message.",
		InputSchema: object(props{
			"technician_id": str(`Technician id, e.g. "T-11".`),
			"message":       str("Text of the page."),
			"tenant":        tenantProp,
		}, "technician_id", "message"),
	}, s.pageTechnician)

	addTool(s, &mcp.Tool{
		Name:        ToolMuteBookingAlerts,
		Description: "Mute the operations alerts of a booking (late arrival, no-show) for some minutes.",
		InputSchema: object(props{
			"booking_id": str(`Booking id, e.g. "B-1001".`),
			"minutes":    map[string]any{"type": "integer", "minimum": 1, "description": "How long to mute, in minutes."},
			"tenant":     tenantProp,
		}, "booking_id", "minutes"),
	}, s.muteBookingAlerts)

	addTool(s, &mcp.Tool{
		Name:        ToolCancelBooking,
		Description: "Cancel a booking. The slot is released; this cannot be undone.",
		InputSchema: object(props{
			"booking_id": str(`Booking id, e.g. "B-1001".`),
			"tenant":     tenantProp,
		}, "booking_id"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)},
	}, s.cancelBooking)
}

// Handlers. Each returns its result as the typed output; the SDK puts it in
// structuredContent and, as JSON text, in a text content block. An error
// becomes a tool result with isError set.

func (s *Server) findCustomers(ctx context.Context, req *mcp.CallToolRequest, in findCustomersIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolFindCustomers, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	q := strings.ToLower(strings.TrimSpace(in.Query))
	out := CustomerList{Tenant: tenant, Query: in.Query, Customers: []Customer{}}
	for _, c := range sortedValues(d.customers) {
		if q == "" || slices.ContainsFunc([]string{c.ID, c.Name, c.Email, c.Phone}, func(f string) bool {
			return strings.Contains(strings.ToLower(f), q)
		}) {
			out.Customers = append(out.Customers, c)
		}
	}
	return nil, out, nil
}

func (s *Server) getBooking(ctx context.Context, req *mcp.CallToolRequest, in getBookingIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolGetBooking, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	b, err := d.booking(tenant, in.BookingID)
	if err != nil {
		return nil, nil, err
	}
	return nil, d.view(b), nil
}

func (s *Server) listTechnicians(ctx context.Context, req *mcp.CallToolRequest, in listTechniciansIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolListTechnicians, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	return nil, TechnicianList{Tenant: tenant, Technicians: sortedValues(d.technicians)}, nil
}

func (s *Server) createBooking(ctx context.Context, req *mcp.CallToolRequest, in createBookingIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolCreateBooking, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.customer(tenant, in.CustomerID); err != nil {
		return nil, nil, err
	}
	if _, err := d.technician(tenant, in.TechnicianID); err != nil {
		return nil, nil, err
	}
	if err := checkStart(in.Start); err != nil {
		return nil, nil, err
	}
	now := s.stamp()
	b := &Booking{
		ID:           fmt.Sprintf("B-%d", d.nextBooking),
		Tenant:       tenant,
		CustomerID:   in.CustomerID,
		TechnicianID: in.TechnicianID,
		Start:        in.Start,
		Status:       StatusScheduled,
		Notes:        in.Notes,
		InternalCost: 120.00,
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	d.nextBooking++
	d.bookings[b.ID] = b
	return nil, d.view(b), nil
}

func (s *Server) updateBooking(ctx context.Context, req *mcp.CallToolRequest, in updateBookingIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolUpdateBooking, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	b, err := d.booking(tenant, in.BookingID)
	if err != nil {
		return nil, nil, err
	}
	// Check everything before changing anything.
	if in.Start != nil {
		if err := checkStart(*in.Start); err != nil {
			return nil, nil, err
		}
	}
	if in.Status != nil && !slices.Contains(bookingStatuses, *in.Status) {
		return nil, nil, fmt.Errorf("status %q is not one of %s", *in.Status, strings.Join(bookingStatuses, ", "))
	}
	if in.TechnicianID != nil {
		if _, err := d.technician(tenant, *in.TechnicianID); err != nil {
			return nil, nil, err
		}
	}
	if in.Start != nil {
		b.Start = *in.Start
	}
	if in.Notes != nil {
		b.Notes = *in.Notes
	}
	if in.Status != nil {
		b.Status = *in.Status
	}
	if in.TechnicianID != nil {
		b.TechnicianID = *in.TechnicianID
	}
	b.UpdatedAt = s.stamp()
	return nil, d.view(b), nil
}

func (s *Server) sendBookingConfirmation(ctx context.Context, req *mcp.CallToolRequest, in bookingIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolSendBookingConfirmation, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	b, err := d.booking(tenant, in.BookingID)
	if err != nil {
		return nil, nil, err
	}
	if b.Status == StatusCancelled {
		return nil, nil, fmt.Errorf("booking %q is cancelled", b.ID)
	}
	v := d.view(b)
	if v.Customer == nil {
		return nil, nil, fmt.Errorf("booking %q has no customer", b.ID)
	}
	tech := "a technician"
	if v.Technician != nil {
		tech = v.Technician.Name
	}
	s.seq++
	now := s.stamp()
	body := fmt.Sprintf("Hello %s, your visit from %s on %s is confirmed.", v.Customer.Name, tech, b.Start)
	if b.Notes != "" {
		body += " Your notes: " + b.Notes
	}
	if b.Status == StatusScheduled {
		b.Status = StatusConfirmed
		b.UpdatedAt = now
	}
	return nil, Confirmation{
		BookingID: b.ID,
		MessageID: fmt.Sprintf("msg-%d", s.seq),
		To:        v.Customer.Email,
		Subject:   fmt.Sprintf("Booking %s confirmed", b.ID),
		Body:      body,
		Status:    "sent",
		SentAt:    now,
	}, nil
}

func (s *Server) pageTechnician(ctx context.Context, req *mcp.CallToolRequest, in pageTechnicianIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolPageTechnician, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	t, err := d.technician(tenant, in.TechnicianID)
	if err != nil {
		return nil, nil, err
	}
	s.seq++
	return nil, Page{
		PageID:         fmt.Sprintf("page-%d", s.seq),
		TechnicianID:   t.ID,
		TechnicianName: t.Name,
		DeliveredTo:    t.Phone,
		Message:        in.Message,
		Status:         "delivered",
		SentAt:         s.stamp(),
	}, nil
}

func (s *Server) muteBookingAlerts(ctx context.Context, req *mcp.CallToolRequest, in muteBookingAlertsIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolMuteBookingAlerts, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	b, err := d.booking(tenant, in.BookingID)
	if err != nil {
		return nil, nil, err
	}
	if in.Minutes < 1 {
		return nil, nil, fmt.Errorf("minutes must be at least 1, got %d", in.Minutes)
	}
	now := s.now().UTC()
	until := now.Add(time.Duration(in.Minutes) * time.Minute).Format(time.RFC3339)
	b.AlertsMutedUntil = &until // a new string: earlier views keep theirs
	b.UpdatedAt = now.Format(time.RFC3339)
	return nil, AlertMute{BookingID: b.ID, Minutes: in.Minutes, AlertsMutedUntil: until}, nil
}

func (s *Server) cancelBooking(ctx context.Context, req *mcp.CallToolRequest, in bookingIn) (*mcp.CallToolResult, any, error) {
	if err := s.assertedTenant(req, &in.Tenant); err != nil {
		return nil, nil, err
	}
	s.count(ctx, ToolCancelBooking, in.Tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant, d, err := s.tenantLocked(in.Tenant)
	if err != nil {
		return nil, nil, err
	}
	b, err := d.booking(tenant, in.BookingID)
	if err != nil {
		return nil, nil, err
	}
	// Cancelling twice is harmless: the booking stays cancelled.
	if b.Status != StatusCancelled {
		b.Status = StatusCancelled
		b.UpdatedAt = s.stamp()
	}
	return nil, d.view(b), nil
}

// checkStart accepts an RFC 3339 time with an offset.
func checkStart(start string) error {
	if _, err := time.Parse(time.RFC3339, start); err != nil {
		return fmt.Errorf("start %q is not an RFC 3339 time such as 2026-08-10T09:00:00+01:00", start)
	}
	return nil
}

// stamp is the current time for created_at / updated_at / sent_at.
func (s *Server) stamp() string { return s.now().UTC().Format(time.RFC3339) }
