package testkit

import (
	"net"
	"testing"
)

// FreeAddr is a loopback address (127.0.0.1:port) nothing listened on a
// moment ago: for a process the test starts and must name its address
// before it runs. Another process may take the port in between; tests that
// can pass a listener pass one instead.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
