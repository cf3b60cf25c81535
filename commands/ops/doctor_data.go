package ops

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"github.com/corralhq/corral/commands/apipb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (d *doctor) checkInfrastore(ctx context.Context) {
	f := Finding{Check: "infrastore"}
	if d.leader == nil && len(d.status) == 0 {
		f.Severity, f.Summary = Skip, "not checked: no master answered"
		d.add(f)
		return
	}
	c, st := d.leader, d.lReply
	if c == nil {
		for _, addr := range sortedKeys(d.status) {
			c, _ = d.dial(addr)
			st = d.status[addr]
			break
		}
	}
	cctx, cancel := d.ctx(ctx)
	defer cancel()
	reply, err := c.Query(cctx, &apipb.QueryRequest{Sql: "SELECT 1", TimeoutMs: 2000})
	switch {
	case status.Code(err) == codes.Unimplemented:
		f.Severity, f.Summary = Skip, fmt.Sprintf("master %q runs no Infrastore (`corral master --infrastore PATH` keeps one)", st.Master)
	case status.Code(err) == codes.PermissionDenied:
		// The rule of who may query (commands.MayQueryCell) is the
		// caller's to meet, not the Infrastore's to fail.
		f.Severity, f.Summary = Skip, "not checked: "+grpcMessage(err)
		f.Fix = "run the doctor with an admin's credentials to check the Infrastore"
	case err != nil:
		f.Severity = Fail
		f.Summary = "the Infrastore does not answer: " + grpcMessage(err)
		f.Fix = "see the master's log for \"Infrastore\"; it is derived data: `corral infrastore rebuild` recreates it from the log"
	case st.StoreError != "":
		f.Summary = fmt.Sprintf("the Infrastore has ingested position %d; its lag is unknown while the log's head cannot be read", reply.Position)
	default:
		lag := st.Head - reply.Position
		f.Summary = fmt.Sprintf("the Infrastore has ingested position %d of %d (%d behind)", reply.Position, st.Head, max(lag, 0))
		if lag > d.cfg.MaxInfraLag {
			f.Severity = Fail
			f.Fix = "see the master's log for \"Infrastore ingestion stopped\"; restart the master to resume ingestion, or rebuild it with `corral infrastore rebuild`"
		}
	}
	d.add(f)
}

func (d *doctor) checkDisk() {
	f := Finding{Check: "disk"}
	if d.cfg.DataDir == "" {
		f.Severity, f.Summary = Skip, "not checked: give --data to check the data directory's free space"
		d.add(f)
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.cfg.DataDir, &st); err != nil {
		f.Severity, f.Summary = Fail, fmt.Sprintf("cannot read %s: %v", d.cfg.DataDir, err)
		f.Fix = "check --data: the directory must exist and be readable"
		d.add(f)
		return
	}
	free := int64(st.Bavail) * st.Bsize
	total := int64(st.Blocks) * st.Bsize
	ratio := 0.0
	if total > 0 {
		ratio = float64(free) / float64(total)
	}
	f.Summary = fmt.Sprintf("%s free of %s (%.0f%%) for %s", bytesText(free), bytesText(total), 100*ratio, d.cfg.DataDir)
	if free < d.cfg.MinFreeBytes || ratio < d.cfg.MinFreeRatio {
		f.Severity = Fail
		f.Fix = fmt.Sprintf("free space on %s (old task sandboxes and rotated logs go after RetainEnded; the Infrastore can be rebuilt smaller), or move --data to a larger filesystem; keep at least %s and %.0f%% free",
			d.cfg.DataDir, bytesText(d.cfg.MinFreeBytes), 100*d.cfg.MinFreeRatio)
	}
	d.add(f)
}

func bytesText(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// redact hides a password in a store URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "***")
		return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
	}
	return s
}

// storeProbe is what the doctor read from the store directly.
