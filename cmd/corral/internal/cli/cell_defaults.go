package cli

func (a *app) dataDir(flag string) string {
	if flag != "" {
		return flag
	}
	if d := a.getenv("CORRAL_DATA"); d != "" {
		return d
	}
	return DefaultData
}

// DefaultData is the data directory of `corral up`.
const DefaultData = "./corral-data"

func (a *app) cellName() string {
	if c := a.getenv("CORRAL_CELL"); c != "" {
		return c
	}
	return DefaultCell
}

// DefaultCell is the cell name of `corral up`.
const DefaultCell = "dev"
