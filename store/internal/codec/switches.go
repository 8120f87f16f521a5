package codec

import (
	"encoding/json"
	"fmt"

	"github.com/mcpgate/mcpgate/store"
)

// switchJSON is the JSON form of a kill switch, the same in both backends.
type switchJSON struct {
	Tenant string `json:"tenant,omitempty"`
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"`
	SetBy  string `json:"set_by"`
	AtUS   int64  `json:"at_us"`
}

// MarshalSwitch encodes s as JSON (the time in microseconds).
func MarshalSwitch(s store.Switch) ([]byte, error) {
	return json.Marshal(switchJSON{Tenant: s.Tenant, On: s.On, Reason: s.Reason, SetBy: s.SetBy, AtUS: Micros(s.At)})
}

// UnmarshalSwitch decodes MarshalSwitch.
func UnmarshalSwitch(b []byte) (store.Switch, error) {
	var w switchJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return store.Switch{}, fmt.Errorf("decode switch: %w", err)
	}
	return store.Switch{Tenant: w.Tenant, On: w.On, Reason: w.Reason, SetBy: w.SetBy, At: FromMicros(w.AtUS)}, nil
}
