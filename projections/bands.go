package projections

import "github.com/corralhq/corral/events"

// The priority bands are defined once, in events (events/bands.go); these
// names keep the projection's callers short.
type Band = events.Band

const (
	BestEffort  = events.BandBestEffort
	Batch       = events.BandBatch
	Production  = events.BandProduction
	Monitoring  = events.BandMonitoring
	MaxPriority = events.MaxPriority
)

var (
	Bands     = events.Bands
	BandOf    = events.BandOf
	IsProd    = events.IsProd
	ParseBand = events.ParseBand
)
