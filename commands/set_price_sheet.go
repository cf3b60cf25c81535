package commands

import (
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// SetPriceSheet records the cell's price sheet from Sheet.EffectiveUs on
// (0: now). A sheet never takes effect before it is set, so a new sheet
// never reprices a usage window that a bill may already have shown; only
// the cell's first sheet, written when the cell is created, covers all
// time (effective 0). Bands the sheet does not name are charged nothing.
type SetPriceSheet struct {
	Meta
	Sheet *events.PriceSheetSet
}

// Largest price of one unit-hour and most decimals a price may have: the
// Infrastore keeps prices as DECIMAL(18,9).
const (
	maxPriceDigits  = 9
	maxPriceDecimal = 9
	maxNoteBytes    = 1024
)

var (
	currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)
	decimalPrice = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9})?$`)
)

func (c SetPriceSheet) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "setting the price sheet"); err != nil {
		return nil, err
	}
	if c.Sheet == nil {
		return nil, invalid("sheet", "must be set")
	}
	sheet := cloneSheet(c.Sheet)
	var v violations
	if !currencyCode.MatchString(sheet.Currency) {
		v.add("currency", "%q is not an ISO 4217 code of three capital letters, e.g. USD", sheet.Currency)
	}
	first := len(s.PriceSheets) == 0
	switch {
	case sheet.EffectiveUs == 0 && !first:
		sheet.EffectiveUs = now.UnixMicro()
	case sheet.EffectiveUs < 0:
		v.add("effective", "must not be negative")
	case sheet.EffectiveUs != 0 && sheet.EffectiveUs < now.UnixMicro():
		v.add("effective", "%s is in the past (now %s): a sheet cannot reprice what was already used",
			time.UnixMicro(sheet.EffectiveUs).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case sheet.EffectiveUs > now.AddDate(10, 0, 0).UnixMicro():
		v.add("effective", "is more than ten years ahead")
	}
	if len(sheet.Bands) == 0 {
		v.add("bands", "must price at least one band (monitoring, production, batch, best-effort)")
	}
	for _, name := range slices.Sorted(maps.Keys(sheet.Bands)) {
		if _, ok := projections.ParseBand(name); !ok {
			v.add("bands", "%q is not monitoring, production, batch or best-effort", name)
			continue
		}
		p := sheet.Bands[name]
		if p == nil {
			v.add("bands."+name, "must be set")
			continue
		}
		switch p.Basis {
		case "limit", "reservation", "usage":
		case "":
			v.add("bands."+name+".basis", "must be limit, reservation or usage")
		default:
			v.add("bands."+name+".basis", "%q is not limit, reservation or usage", p.Basis)
		}
		checkPrices(&v, "bands."+name, p)
	}
	if sheet.Machine != nil {
		if sheet.Machine.Basis != "" {
			v.add("machine.basis", "machine costs have no basis: they price capacity")
		}
		checkPrices(&v, "machine", sheet.Machine)
	}
	if len(sheet.Note) > maxNoteBytes {
		v.add("note", "is %d bytes; at most %d", len(sheet.Note), maxNoteBytes)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	b := newDraft(s, now)
	b.add(events.BillingStream, sheet)
	return b.evs, nil
}

// checkPrices validates a set of prices; an empty price is zero.
func checkPrices(v *violations, field string, p *events.Prices) {
	for _, f := range []struct {
		name  string
		value *string
	}{{"cpu_core_hour", &p.CpuCoreHour}, {"memory_gib_hour", &p.MemoryGibHour}, {"disk_gib_hour", &p.DiskGibHour}, {"gpu_hour", &p.GpuHour}} {
		if *f.value == "" {
			*f.value = "0"
			continue
		}
		if !decimalPrice.MatchString(*f.value) {
			v.add(field+"."+f.name, "%q is not a non-negative decimal of at most %d digits before and %d after the point", *f.value, maxPriceDigits, maxPriceDecimal)
		}
	}
}

func cloneSheet(p *events.PriceSheetSet) *events.PriceSheetSet {
	return proto.Clone(p).(*events.PriceSheetSet)
}

// DefaultPriceSheet is the sheet a new cell starts with. Higher bands cost
// more per unit; prod bands are charged on their limits (the cell sets that
// much aside for them), batch on its reservation and best-effort only on
// what it used (it runs on reclaimed resources). The machine prices are
// what a unit-hour of capacity costs the cell, whoever uses it: idle cost.
func DefaultPriceSheet() *events.PriceSheetSet {
	return &events.PriceSheetSet{
		Currency: "USD",
		Bands: map[string]*events.Prices{
			"monitoring":  {Basis: "limit", CpuCoreHour: "0.060", MemoryGibHour: "0.0080", DiskGibHour: "0.00020", GpuHour: "1.20"},
			"production":  {Basis: "limit", CpuCoreHour: "0.048", MemoryGibHour: "0.0064", DiskGibHour: "0.00016", GpuHour: "1.00"},
			"batch":       {Basis: "reservation", CpuCoreHour: "0.024", MemoryGibHour: "0.0032", DiskGibHour: "0.00010", GpuHour: "0.60"},
			"best-effort": {Basis: "usage", CpuCoreHour: "0.008", MemoryGibHour: "0.0011", DiskGibHour: "0.00005", GpuHour: "0.20"},
		},
		Machine: &events.Prices{CpuCoreHour: "0.020", MemoryGibHour: "0.0025", DiskGibHour: "0.00004", GpuHour: "0.45"},
		Note:    "the default sheet, written when the cell was created",
	}
}
