package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"google.golang.org/grpc/status"
)

func (d *doctor) checkMasters(ctx context.Context) {
	f := Finding{Check: "masters"}
	if len(d.cfg.Masters) == 0 {
		f.Severity, f.Summary = Fail, "no master address given"
		f.Fix = "give --master (or set CORRAL_MASTER) to the cell's masters' gRPC addresses"
		d.add(f)
		return
	}
	for _, addr := range d.cfg.Masters {
		c, err := d.dial(addr)
		var st *apipb.StatusReply
		if err == nil {
			cctx, cancel := d.ctx(ctx)
			st, err = c.Status(cctx, &apipb.StatusRequest{})
			cancel()
		}
		if err != nil {
			d.errs[addr] = err
			f.Details = append(f.Details, fmt.Sprintf("%s: does not answer: %s", addr, grpcMessage(err)))
			continue
		}
		d.status[addr] = st
		role := "follower"
		if st.Leader {
			role = "leader"
			d.leader, d.lAddr, d.lReply = c, addr, st
		}
		f.Details = append(f.Details, fmt.Sprintf("%s: master %q, %s, applied position %d%s", addr, st.Master, role, st.Position, ofHead(st)))
	}
	// The leader may be a master the doctor was not told of.
	if d.leader == nil {
		for _, st := range d.status {
			if st.LeaderAddress == "" || d.status[st.LeaderAddress] != nil {
				continue
			}
			c, err := d.dial(st.LeaderAddress)
			if err != nil {
				continue
			}
			cctx, cancel := d.ctx(ctx)
			lst, err := c.Status(cctx, &apipb.StatusRequest{})
			cancel()
			if err == nil && lst.Leader {
				d.leader, d.lAddr, d.lReply = c, st.LeaderAddress, lst
				d.status[st.LeaderAddress] = lst
				f.Details = append(f.Details, fmt.Sprintf("%s: master %q, leader (named by the others), applied position %d%s", st.LeaderAddress, lst.Master, lst.Position, ofHead(lst)))
			}
			break
		}
	}
	switch {
	case len(d.status) == 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("no master answers at %s", strings.Join(d.cfg.Masters, ", "))
		f.Fix = "start the cell (`corral up`, or `corral master` on each master host), or point --master (CORRAL_MASTER) at its gRPC address"
	case len(d.errs) > 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("%d of %d masters answer", len(d.status), len(d.status)+len(d.errs))
		f.Fix = "restart the masters that do not answer (`corral master ...`), or drop their addresses from --master if they were removed"
	default:
		f.Summary = fmt.Sprintf("%d master(s) answer", len(d.status))
	}
	d.add(f)
}

// ofHead says where the log's head is, as a master read it.
func ofHead(st *apipb.StatusReply) string {
	if st.StoreError != "" {
		return " (the log's head is unknown)"
	}
	return fmt.Sprintf(" of %d", st.Head)
}

func grpcMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// checkStore: the masters read the log, and the doctor can too.
func (d *doctor) checkStore() {
	f := Finding{Check: "store"}
	var broken []string
	for _, addr := range sortedKeys(d.status) {
		st := d.status[addr]
		if st.StoreError != "" {
			broken = append(broken, st.Master)
			f.Details = append(f.Details, fmt.Sprintf("master %q cannot read the event log: %s", st.Master, st.StoreError))
		} else {
			f.Details = append(f.Details, fmt.Sprintf("master %q reads the event log (%s): head at %d", st.Master, st.Store, st.Head))
		}
	}
	if p := d.store; p != nil {
		if p.err != nil {
			f.Details = append(f.Details, fmt.Sprintf("the doctor cannot read %s: %v", redact(d.cfg.Store), p.err))
		} else {
			f.Details = append(f.Details, fmt.Sprintf("the doctor reads %s: head at %d", redact(d.cfg.Store), p.head))
		}
	}
	switch {
	case len(broken) > 0 || (d.store != nil && d.store.err != nil):
		f.Severity = Fail
		if len(broken) > 0 {
			f.Summary = fmt.Sprintf("the event log is unreachable from master(s) %s", strings.Join(broken, ", "))
		} else {
			f.Summary = "the event log is unreachable from here"
		}
		f.Fix = "start the database the masters' --store names (PostgreSQL: `pg_ctlcluster <version> main start`; CockroachDB: start its nodes) and check the URL, its credentials and the network path; the masters retry on their own once it answers"
	case len(d.status) == 0 && d.store == nil:
		f.Severity, f.Summary = Skip, "not checked: no master answered and no --store was given"
	case len(d.status) == 0:
		f.Summary = "the doctor reads the event log"
	default:
		f.Summary = "the event log answers"
	}
	d.add(f)
}

func (d *doctor) checkMigrations() {
	f := Finding{Check: "migrations"}
	switch p := d.store; {
	case p == nil:
		f.Severity, f.Summary = Skip, "not checked: give --store (the event log's URL) to read its migration version"
	case p.err != nil:
		f.Severity, f.Summary = Fail, "not checked: the event log is unreachable (see store)"
		f.Fix = "make the store reachable, then run the doctor again"
	case p.versionErr != nil:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("no migration version: %v", p.versionErr)
		f.Fix = fmt.Sprintf("apply the schema: `corral migrate up --store %s` (masters also do it when they start)", redact(d.cfg.Store))
	case p.dirty:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("migration %d failed half-way (schema_migrations is dirty)", p.version)
		f.Fix = fmt.Sprintf("read the failed migration %06d in migrations/%s, repair the schema by hand, then clear the flag: UPDATE schema_migrations SET dirty = false", p.version, p.flavor)
	case p.version < p.latest:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("the schema is at migration %d; this corral expects %d", p.version, p.latest)
		f.Fix = fmt.Sprintf("run `corral migrate up --store %s` (masters also apply migrations when they start)", redact(d.cfg.Store))
	case p.version > p.latest:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("the schema is at migration %d, newer than this corral's %d", p.version, p.latest)
		f.Fix = "upgrade this corral binary to the masters' version"
	default:
		f.Summary = fmt.Sprintf("the schema is at migration %d, the latest", p.version)
	}
	d.add(f)
}

func (d *doctor) checkLeader() {
	f := Finding{Check: "leader"}
	var named string
	for _, st := range d.status {
		if st.LeaderName != "" {
			named = st.LeaderName
		}
	}
	if p := d.store; p != nil && p.err == nil && p.leaseOK {
		state := "held until " + p.lease.ExpiresAt.Local().Format(time.RFC3339)
		switch {
		case p.lease.ExpiresAt.Unix() <= 0:
			state = "released"
		case d.now.After(p.lease.ExpiresAt):
			state = "expired at " + p.lease.ExpiresAt.Local().Format(time.RFC3339)
		}
		f.Details = append(f.Details, fmt.Sprintf("the lease in the store: %s, epoch %d, %s", p.lease.Holder, p.lease.Epoch, state))
	}
	switch {
	case d.lReply != nil:
		st := d.lReply
		f.Summary = fmt.Sprintf("%s leads (epoch %d) at %s", st.Master, st.Epoch, d.lAddr)
		if st.StoreError != "" {
			f.Details = append(f.Details, "it cannot renew its lease while the event log is unreachable: it stops leading when the lease expires, and no master leads until the log answers again")
		}
		if st.LeaderSinceUs != 0 {
			since := time.UnixMicro(st.LeaderSinceUs)
			f.Summary += fmt.Sprintf(", since %s (%s ago)", since.Local().Format(time.RFC3339), d.now.Sub(since).Round(time.Second))
		}
	case len(d.status) == 0 && d.store != nil && d.store.err == nil && d.store.leaseOK && d.now.Before(d.store.lease.ExpiresAt):
		f.Severity = Fail
		f.Summary = fmt.Sprintf("the lease names %s (epoch %d), but no master answers", d.store.lease.Holder, d.store.lease.Epoch)
		f.Fix = "check that the leader's gRPC address is reachable from here"
	case len(d.status) == 0:
		f.Severity, f.Summary = Skip, "not checked: no master answered"
	default:
		f.Severity = Fail
		f.Summary = "no master leads"
		if named != "" {
			f.Summary += fmt.Sprintf(" (the log's last leader was %s)", named)
		}
		f.Fix = "a master leads only while it can renew its lease in the event log: fix the store if it is unreachable; otherwise look at the masters' logs for \"campaigning\" errors; a new leader is elected within the lease TTL (6 s)"
	}
	d.add(f)
}

// machines lists the machines as the leader (or any master) sees them.
