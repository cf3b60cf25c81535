package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
)

// priceCommand is `corral price set|get|history`.
func (a *app) priceCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "price",
		Short: "the cell's price sheets: what a core-hour, a GiB-hour and a GPU-hour cost, per band",
		Long: `The cell's price sheets, kept in its log. A sheet prices, per priority band,
a core-hour, a GiB-hour of memory and of disk, and a GPU-hour, and says what
the band is charged on (limit, reservation or usage); its machine prices are
what a unit-hour of capacity costs the cell (idle cost). Bills price each
usage window by the sheet in force when it started, so a new sheet never
changes a bill already made.`,
	}
	c.AddCommand(a.priceSetCommand(), a.priceGetCommand(), a.priceHistoryCommand())
	return c
}

// priceSetCommand is `corral price set FILE`.
func (a *app) priceSetCommand() *cobra.Command {
	var effective string
	set := &cobra.Command{
		Use:   "set FILE",
		Short: "set a new price sheet (JSON or YAML) from now or --effective",
		Example: `  corral price set prices.yaml --effective 2026-12-01T00:00:00Z

  # prices.yaml
  currency: USD
  bands:
    production: {basis: limit, cpu_core_hour: 0.048, memory_gib_hour: 0.0064, disk_gib_hour: 0.00016, gpu_hour: 1.00}
    batch: {basis: reservation, cpu_core_hour: 0.024, memory_gib_hour: 0.0032}
  machine: {cpu_core_hour: 0.020, memory_gib_hour: 0.0025, gpu_hour: 0.45}`,
		Args: args(1, 1, "a price sheet file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			sheet, err := loadPriceSheet(argv[0])
			if err != nil {
				return err
			}
			if effective != "" {
				t, err := parseTime(effective, time.Now())
				if err != nil {
					return usageErr("--effective: %v", err)
				}
				sheet.EffectiveUs = t.UnixMicro()
			}
			return a.mutation(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.SetPriceSheet(ctx, &apipb.SetPriceSheetRequest{RequestId: id, Sheet: sheet}, o...)
			}, "price sheet set")
		},
	}
	set.Flags().StringVar(&effective, "effective", "", "when it takes effect (default now; never in the past)")
	return set
}

// priceGetCommand is `corral price get`.
func (a *app) priceGetCommand() *cobra.Command {
	var at string
	get := &cobra.Command{
		Use:   "get",
		Short: "the price sheet in force now, or --at a time",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var atUS int64
			if at != "" {
				t, err := parseTime(at, time.Now())
				if err != nil {
					return usageErr("--at: %v", err)
				}
				atUS = t.UnixMicro()
			}
			list, err := a.priceSheets(cmd.Context(), atUS)
			if err != nil {
				return err
			}
			for _, s := range list.Sheets {
				if s.InForce {
					return a.showSheet(s)
				}
			}
			return fmt.Errorf("no price sheet is in force then")
		},
	}
	get.Flags().StringVar(&at, "at", "", "the sheet in force at this time")
	return get
}

// priceHistoryCommand is `corral price history`.
func (a *app) priceHistoryCommand() *cobra.Command {
	history := &cobra.Command{
		Use:   "history",
		Short: "every price sheet and closed billing period",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := a.priceSheets(cmd.Context(), 0)
			if err != nil {
				return err
			}
			tab := &table{cols: []string{"POSITION", "SET", "EFFECTIVE", "CURRENCY", "IN FORCE", "NOTE"}}
			for _, s := range list.Sheets {
				eff := "always"
				if s.Sheet.EffectiveUs != 0 {
					eff = time.UnixMicro(s.Sheet.EffectiveUs).UTC().Format(time.RFC3339)
				}
				force := ""
				if s.InForce {
					force = "yes"
				}
				tab.add(strconv.FormatInt(s.Position, 10), time.UnixMicro(s.SetUs).UTC().Format(time.RFC3339), eff, s.Sheet.Currency, force, s.Sheet.Note)
			}
			if err := a.show(tab, list.Sheets); err != nil {
				return err
			}
			if a.output == "table" && len(list.Closed) > 0 {
				var months []string
				for _, c := range list.Closed {
					months = append(months, fmt.Sprintf("%s (at %d)", time.UnixMicro(c.PeriodStartUs).UTC().Format("2006-01"), c.Position))
				}
				fmt.Fprintf(a.stdout(), "closed billing periods: %s\n", strings.Join(months, ", "))
			}
			return nil
		},
	}
	return history
}

func (a *app) priceSheets(ctx context.Context, atUS int64) (*apipb.PriceSheetList, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return readValue(ctx, cl, apipb.CellClient.GetPriceSheets, &apipb.GetPriceSheetsRequest{AtUs: atUS})
}

func (a *app) showSheet(s *apipb.PriceSheetView) error {
	tab := &table{cols: []string{"BAND", "BASIS", "CORE-HOUR", "MEMORY GIB-HOUR", "DISK GIB-HOUR", "GPU-HOUR"}}
	bands := make([]string, 0, len(s.Sheet.Bands))
	for b := range s.Sheet.Bands {
		bands = append(bands, b)
	}
	sort.Slice(bands, func(i, j int) bool { return bandOrder(bands[i]) < bandOrder(bands[j]) })
	for _, b := range bands {
		p := s.Sheet.Bands[b]
		tab.add(b, p.Basis, p.CpuCoreHour, p.MemoryGibHour, p.DiskGibHour, p.GpuHour)
	}
	if m := s.Sheet.Machine; m != nil {
		tab.add("(machines)", "capacity", m.CpuCoreHour, m.MemoryGibHour, m.DiskGibHour, m.GpuHour)
	}
	if a.output == "table" {
		eff := "from the cell's start"
		if s.Sheet.EffectiveUs != 0 {
			eff = "from " + time.UnixMicro(s.Sheet.EffectiveUs).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(a.stdout(), "price sheet at position %d, in %s, %s\n", s.Position, s.Sheet.Currency, eff)
	}
	return a.show(tab, s)
}

func bandOrder(b string) int {
	for i, x := range []string{"monitoring", "production", "batch", "best-effort"} {
		if b == x {
			return i
		}
	}
	return 9
}

// loadPriceSheet reads a price sheet from JSON or YAML. Prices may be
// written as numbers or strings; they travel as exact decimal strings.
func loadPriceSheet(path string) (*events.PriceSheetSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	stringify := func(m any) {
		if p, ok := m.(map[string]any); ok {
			for k, v := range p {
				if n, ok := v.(json.Number); ok {
					p[k] = n.String()
				}
			}
		}
	}
	if bands, ok := doc["bands"].(map[string]any); ok {
		for _, b := range bands {
			stringify(b)
		}
	}
	stringify(doc["machine"])
	norm, _ := json.Marshal(doc)
	sheet := &events.PriceSheetSet{}
	if err := protojson.Unmarshal(norm, sheet); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return sheet, nil
}
