package decide

import (
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

func num(v float64) *float64 { return &v }

// against judges v against l.
func against(l settings.Limit, signal, subject string, v float64, detail string) status.Reason {
	return status.Reason{Signal: signal, Subject: subject, Value: num(v), Limit: num(l.Value), Unit: l.Unit,
		Rule: l.Rule, Basis: l.Basis, OK: l.OK(v), Detail: detail}
}
