package infrastore

import (
	"math"
	"strconv"
)

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}
