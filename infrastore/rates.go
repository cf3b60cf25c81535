package infrastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// What a band is charged on.
const (
	// BasisLimit charges what the tasks asked for: prod tasks are placed by
	// their limits, so the cell sets that much aside for them.
	BasisLimit = "limit"
	// BasisReservation charges what the master estimated they need, which is
	// what the cell sets aside for non-prod tasks.
	BasisReservation = "reservation"
	// BasisUsage charges what they used.
	BasisUsage = "usage"
)

// UnknownBand is the band of usage whose job the store never saw; it is
// charged only if the rate table names it.
const UnknownBand = "unknown"

// Rates is the price list of a bill: per priority band, what is charged
// (the basis) and the price of a core-hour, a GiB-hour of memory and a
// GiB-hour of disk, in Currency.
type Rates struct {
	Currency string              `json:"currency"`
	Bands    map[string]BandRate `json:"bands"`
}

// BandRate is one band's prices.
type BandRate struct {
	Basis         string  `json:"basis"`
	CPUCoreHour   Decimal `json:"cpu_core_hour"`
	MemoryGiBHour Decimal `json:"memory_gib_hour"`
	DiskGiBHour   Decimal `json:"disk_gib_hour"`
}

// DefaultRates is the price list used when none is given. Higher bands cost
// more per unit, and prod bands are charged on their limits, batch on its
// reservation and best-effort only on what it used (it runs on reclaimed
// resources).
func DefaultRates() *Rates {
	d := func(s string) Decimal {
		v, err := ParseDecimal(s, QuantityScale)
		if err != nil {
			panic(err)
		}
		return v
	}
	return &Rates{
		Currency: "USD",
		Bands: map[string]BandRate{
			"monitoring":  {Basis: BasisLimit, CPUCoreHour: d("0.060"), MemoryGiBHour: d("0.0080"), DiskGiBHour: d("0.00020")},
			"production":  {Basis: BasisLimit, CPUCoreHour: d("0.048"), MemoryGiBHour: d("0.0064"), DiskGiBHour: d("0.00016")},
			"batch":       {Basis: BasisReservation, CPUCoreHour: d("0.024"), MemoryGiBHour: d("0.0032"), DiskGiBHour: d("0.00010")},
			"best-effort": {Basis: BasisUsage, CPUCoreHour: d("0.008"), MemoryGiBHour: d("0.0011"), DiskGiBHour: d("0.00005")},
		},
	}
}

// LoadRates reads a rate table from a JSON or YAML file (see ParseRates).
func LoadRates(path string) (*Rates, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("infrastore: rates: %w", err)
	}
	r, err := ParseRates(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// ParseRates reads a rate table in JSON or YAML:
//
//	currency: USD
//	bands:
//	  production:  {basis: limit, cpu_core_hour: 0.048, memory_gib_hour: 0.0064, disk_gib_hour: 0.00016}
//	  ...
//
// Every band (monitoring, production, batch, best-effort) must be priced;
// "unknown" may be. Prices are plain decimals with at most 9 decimals
// (quote them to be sure YAML keeps every digit).
func ParseRates(data []byte) (*Rates, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: rates: not JSON or YAML: %v", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var r Rates
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: rates: %v", ErrInvalid, err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks the table; the error names the field.
func (r *Rates) Validate() error {
	if strings.TrimSpace(r.Currency) == "" {
		return fmt.Errorf("%w: rates.currency: must be set, e.g. USD", ErrInvalid)
	}
	for _, b := range []string{"monitoring", "production", "batch", "best-effort"} {
		if _, ok := r.Bands[b]; !ok {
			return fmt.Errorf("%w: rates.bands.%s: missing; every band needs a price", ErrInvalid, b)
		}
	}
	names := make([]string, 0, len(r.Bands))
	for b := range r.Bands {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		br := r.Bands[b]
		if _, ok := bandRank[b]; !ok && b != UnknownBand {
			return fmt.Errorf("%w: rates.bands.%s: not a band (monitoring, production, batch, best-effort, unknown)", ErrInvalid, b)
		}
		switch br.Basis {
		case BasisLimit, BasisReservation, BasisUsage:
		default:
			return fmt.Errorf("%w: rates.bands.%s.basis: %q is not limit, reservation or usage", ErrInvalid, b, br.Basis)
		}
		for _, p := range []struct {
			name string
			v    Decimal
		}{{"cpu_core_hour", br.CPUCoreHour}, {"memory_gib_hour", br.MemoryGiBHour}, {"disk_gib_hour", br.DiskGiBHour}} {
			if p.v.Unscaled == nil {
				return fmt.Errorf("%w: rates.bands.%s.%s: missing", ErrInvalid, b, p.name)
			}
			if p.v.unscaled().Sign() < 0 {
				return fmt.Errorf("%w: rates.bands.%s.%s: must not be negative", ErrInvalid, b, p.name)
			}
			if p.v.Scale > QuantityScale {
				return fmt.Errorf("%w: rates.bands.%s.%s: more than %d decimals", ErrInvalid, b, p.name, QuantityScale)
			}
		}
	}
	return nil
}
