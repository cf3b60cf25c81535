package api_test

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/pgtest"
)

// The PostgreSQL the tests' databases live on is this binary's own, stopped
// after them.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
