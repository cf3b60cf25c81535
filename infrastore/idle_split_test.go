package infrastore

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
)

// capacitySpan is a machine's capacity over [from, to), as the log says.
type capacitySpan struct {
	cpuMilli, memoryBytes int64
	from, to              time.Time
}

// capacitySpans reads the machines' capacity over time from the log,
// independently of the Infrastore: registrations, updates and removals.
func capacitySpans(evs []events.Event, end time.Time) []*capacitySpan {
	var out []*capacitySpan
	live := map[string]*capacitySpan{}
	for _, e := range evs {
		switch p := e.Data.(type) {
		case *events.MachineRegistered:
			m := &capacitySpan{p.Capacity.GetCpuMilli(), p.Capacity.GetMemoryBytes(), e.OccurredAt, end}
			live[p.Machine], out = m, append(out, m)
		case *events.MachineUpdated:
			if old := live[p.Machine]; old != nil {
				old.to = e.OccurredAt
				m := &capacitySpan{p.Capacity.GetCpuMilli(), p.Capacity.GetMemoryBytes(), e.OccurredAt, end}
				live[p.Machine], out = m, append(out, m)
			}
		case *events.MachineRemoved:
			if old := live[p.Machine]; old != nil {
				old.to = e.OccurredAt
				delete(live, p.Machine)
			}
		}
	}
	return out
}

// capacityIn is the core-hours and GiB-hours the machines could hold in
// [from, to), exact.
func capacityIn(spans []*capacitySpan, from, to time.Time) (cpu, memory *big.Rat) {
	cpu, memory = new(big.Rat), new(big.Rat)
	for _, m := range spans {
		f, t := maxTime(m.from, from), minTime(m.to, to)
		if t.After(f) {
			us := t.Sub(f).Microseconds()
			cpu.Add(cpu, new(big.Rat).SetFrac64(m.cpuMilli*us, 1000*3_600_000_000))
			memory.Add(memory, new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(m.memoryBytes), big.NewInt(us)),
				new(big.Int).Mul(big.NewInt(1<<30), big.NewInt(3_600_000_000))))
		}
	}
	return cpu, memory
}

// TestIdleSplitsAtAMidHourSheet: a price sheet that takes effect at 12:31
// prices the idle capacity of 12:00-12:31 at the old sheet's machine
// prices and of 12:31-13:00 at the new one's. Each part's idle quantity
// is what the machines could hold in it (from the log's machine events)
// less what the charges priced by its sheet took, and the hour's idle cost
// is, to the cent, those quantities at their sheets' prices.
func TestIdleSplitsAtAMidHourSheet(t *testing.T) {
	noon := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	change := noon.Add(31 * time.Minute)
	log := midHourSheetLog(t, noon, change)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), newSQLiteLog(t, log)); err != nil {
		t.Fatal(err)
	}
	var oldSheet, newSheet string
	for _, e := range log {
		if p, ok := e.Data.(*events.PriceSheetSet); ok {
			if p.EffectiveUs == change.UnixMicro() {
				newSheet = itoa(e.Position)
			} else {
				oldSheet = itoa(e.Position)
			}
		}
	}
	spans := capacitySpans(log, noon.Add(2*time.Hour))
	rows := readCSV(t, exportFocus(t, s, FocusRequest{From: noon, To: noon.Add(time.Hour), Cell: "c", Idle: IdleSeparate}))
	parts := map[string]*sheetPart{
		oldSheet: newSheetPart(noon, change, "0.020", "0.0025"),
		newSheet: newSheetPart(change, noon.Add(time.Hour), "0.200", "0.0250"),
	}
	idleTotal := new(big.Rat)
	for _, r := range rows {
		if r["ChargeClass"] != "" || r["ChargePeriodStart"] != "2026-11-27T12:00:00Z" {
			continue
		}
		p := parts[r["x_PriceSheetPosition"]]
		if p == nil {
			t.Fatalf("a row priced by sheet %q, neither the old (%s) nor the new (%s): %v", r["x_PriceSheetPosition"], oldSheet, newSheet, r)
		}
		if r["ResourceType"] == "Idle capacity" {
			idleTotal.Add(idleTotal, dec(t, r["BilledCost"]))
		}
		p.add(t, r)
	}
	wantTotal := new(big.Rat)
	for pos, p := range parts {
		wantTotal.Add(wantTotal, p.checkIdle(t, pos, spans))
	}
	// The idle rows of the other meters (disk, GPU) count in the total too:
	// add them at what the export says, checked above for CPU and memory.
	other := new(big.Rat).Set(idleTotal)
	for _, p := range parts {
		other.Sub(other, p.billed["cpu"]).Sub(other, p.billed["memory"])
	}
	wantTotal.Add(wantTotal, other)
	if got, want := idleTotal.FloatString(2), wantTotal.FloatString(2); got != want {
		t.Errorf("the hour's idle costs %s; by the sheet in force at each instant it is %s", got, want)
	}
}

// midHourSheetLog is the log of a cell run from half an hour before noon
// to 13:15, with a price sheet set at the start and a change of machine
// prices that takes effect at change, within the noon hour.
func midHourSheetLog(t *testing.T, noon, change time.Time) []events.Event {
	sim := history.New(history.Hours, 31)
	sim.Now = noon.Add(-30 * time.Minute)
	if !sim.SetPriceSheet(nil) {
		t.Fatal("the first price sheet was refused")
	}
	for sim.Now.Before(noon.Add(30 * time.Minute)) {
		sim.Step()
	}
	if !sim.SetPriceSheet(func(sheet *events.PriceSheetSet) {
		sheet.EffectiveUs = change.UnixMicro()
		sheet.Machine = &events.Prices{CpuCoreHour: "0.200", MemoryGibHour: "0.0250", DiskGibHour: "0.00040", GpuHour: "4.50"}
	}) {
		t.Fatal("the price change was refused")
	}
	for sim.Now.Before(noon.Add(75 * time.Minute)) {
		sim.Step()
	}
	return sim.Log
}

// sheetPart is the part of an hour one sheet prices, and what the export
// says of it.
type sheetPart struct {
	from, to              time.Time
	cpuPrice, memoryPrice string
	charged, idle, billed map[string]*big.Rat // by meter
}

func newSheetPart(from, to time.Time, cpuPrice, memoryPrice string) *sheetPart {
	p := &sheetPart{from: from, to: to, cpuPrice: cpuPrice, memoryPrice: memoryPrice,
		charged: map[string]*big.Rat{}, idle: map[string]*big.Rat{}, billed: map[string]*big.Rat{}}
	for _, m := range []string{"cpu", "memory"} {
		p.charged[m], p.idle[m], p.billed[m] = new(big.Rat), new(big.Rat), new(big.Rat)
	}
	return p
}

func (p *sheetPart) price(meter string) string {
	return map[string]string{"cpu": p.cpuPrice, "memory": p.memoryPrice}[meter]
}

// add counts an export row of the part's CPU or memory.
func (p *sheetPart) add(t *testing.T, r map[string]string) {
	m := r["x_Meter"]
	switch r["ResourceType"] {
	case "Idle capacity":
		if p.idle[m] == nil {
			return
		}
		p.idle[m].Add(p.idle[m], dec(t, r["PricingQuantity"]))
		p.billed[m].Add(p.billed[m], dec(t, r["BilledCost"]))
		if want := p.price(m); dec(t, r["ListUnitPrice"]).Cmp(dec(t, want)) != 0 {
			t.Errorf("idle %s of sheet %s priced at %s, its sheet says %s", m, r["x_PriceSheetPosition"], r["ListUnitPrice"], want)
		}
	case "Task":
		if p.charged[m] != nil {
			p.charged[m].Add(p.charged[m], dec(t, r["PricingQuantity"]))
		}
	}
}

// checkIdle checks the part's idle CPU and memory against the capacity
// of spans less the charges, and returns what that idle capacity costs.
func (p *sheetPart) checkIdle(t *testing.T, pos string, spans []*capacitySpan) *big.Rat {
	cost := new(big.Rat)
	cpu, memory := capacityIn(spans, p.from, p.to)
	for m, c := range map[string]*big.Rat{"cpu": cpu, "memory": memory} {
		want := new(big.Rat).Sub(c, p.charged[m])
		if want.Sign() < 0 {
			want.SetInt64(0)
		}
		// Quantities are kept to 1e-9 units: allow one.
		if diff := new(big.Rat).Sub(p.idle[m], want); diff.Abs(diff).Cmp(big.NewRat(1, 1_000_000_000)) > 0 {
			t.Errorf("sheet %s (%s-%s): idle %s %s; capacity %s less the charges' %s is %s", pos, p.from.Format("15:04"), p.to.Format("15:04"),
				m, p.idle[m].FloatString(9), c.FloatString(9), p.charged[m].FloatString(9), want.FloatString(9))
		}
		cost.Add(cost, new(big.Rat).Mul(want, dec(t, p.price(m))))
		if p.idle[m].Sign() == 0 {
			t.Errorf("sheet %s: no idle %s in %s-%s", pos, m, p.from.Format("15:04"), p.to.Format("15:04"))
		}
	}
	return cost
}
