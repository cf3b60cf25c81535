package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// SetQuota grants a user a vector of resources in a band. Best-effort
// quota is unlimited and cannot be set. Production and monitoring quota in
// total cannot exceed the cell's capacity, so a prod job that fits its
// quota can expect to run (Borg §2.5). Lowering a quota below what is in
// use keeps the running jobs and refuses new ones.
type SetQuota struct {
	Meta
	User      string
	Band      string
	Resources projections.Resources
}

func (c SetQuota) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "setting quota"); err != nil {
		return nil, err
	}
	var v violations
	checkName(&v, "user", c.User)
	band, ok := projections.ParseBand(c.Band)
	switch {
	case !ok:
		v.add("band", "%q is not monitoring, production, batch or best-effort", c.Band)
	case band == projections.BestEffort:
		v.add("band", "best-effort quota is unlimited and cannot be set")
	}
	if c.Resources.Negative() {
		v.add("resources", "must not be negative: %s", c.Resources)
	}
	if c.Resources.Saturate() != c.Resources {
		v.add("resources", "[%s] is more than any total the cell keeps (%d in a dimension)", c.Resources, int64(events.MaxTotal))
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if band == projections.Production || band == projections.Monitoring {
		total := c.Resources
		for ub, q := range s.Quotas {
			if (ub.Band == projections.Production || ub.Band == projections.Monitoring) && ub != (projections.UserBand{User: c.User, Band: band}) {
				var ok bool
				if total, ok = total.AddChecked(q); !ok {
					return nil, refuse(ResourceExhausted, "resources", "production and monitoring quota would total more than the cell's capacity [%s]", s.CellCapacity())
				}
			}
		}
		if capacity := s.CellCapacity(); !total.LessEq(capacity) {
			return nil, refuse(ResourceExhausted, "resources",
				"production and monitoring quota would total [%s], more than the cell's capacity [%s] (short in %v); prod quota is limited to the cell's real resources",
				total, capacity, total.Exceeding(capacity))
		}
	}
	b := newDraft(s, now)
	b.add(events.QuotaStream(c.User), &events.QuotaSet{User: c.User, Band: band.String(), Resources: c.Resources.Proto()})
	return b.evs, nil
}
