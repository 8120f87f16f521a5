package args

import "testing"

const benchSchema = `{
  "type": "object",
  "properties": {
    "booking_id": {"type": "string", "description": "Booking id, e.g. \"B-1001\".", "pattern": "^B-[0-9]+$"},
    "start": {"type": "string", "description": "New start time, RFC 3339 with offset."},
    "notes": {"type": "string", "description": "New notes.", "maxLength": 2000},
    "status": {"type": "string", "enum": ["scheduled", "confirmed", "completed", "cancelled"]},
    "minutes": {"type": "integer", "minimum": 1, "maximum": 1440}
  },
  "required": ["booking_id"]
}`

func BenchmarkCheck(b *testing.B) {
	s, err := Compile([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct{ name, args string }{
		{"valid5", `{"booking_id":"B-1001","start":"2026-08-10T09:00:00+01:00","notes":"Ring twice.","status":"confirmed","minutes":30}`},
		{"coercion", `{"booking_id":"B-1001","start":"2026-08-10T09:00:00+01:00","notes":"Ring twice.","status":"Confirmed","minutes":"30"}`},
		{"invalid", `{"booking_id":"1001","start":"2026-08-10T09:00:00+01:00","notes":"Ring twice.","status":"done","minutes":0,"tenant":"globex"}`},
	}
	// For reference: the validator alone on an already parsed value, i.e.
	// what the library costs of valid5.
	b.Run("validator_only", func(b *testing.B) {
		v, err := parseValue([]byte(cases[0].args), MaxArgumentDepth, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.sch.Validate(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range cases {
		data := []byte(c.args)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Check(data, Options{})
			}
		})
	}
}
