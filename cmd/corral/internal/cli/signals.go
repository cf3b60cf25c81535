package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext ends on Ctrl-C or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
