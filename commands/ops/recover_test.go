package ops_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/internal/testkit"
)

// panickyCell panics in Status and Watch, and answers Get.
type panickyCell struct {
	apipb.UnimplementedCellServer
}

func (panickyCell) Status(context.Context, *apipb.StatusRequest) (*apipb.StatusReply, error) {
	var m []int
	_ = m[len(m)] // an index out of range: the kind of bug a request can reach
	return nil, nil
}

func (panickyCell) Watch(*apipb.EventsRequest, apipb.Cell_WatchServer) error {
	panic("watch went wrong")
}

func (panickyCell) Get(_ context.Context, r *apipb.GetRequest) (*apipb.JobView, error) {
	return &apipb.JobView{}, nil
}

// A panic in any gRPC handler is answered Internal and logged with the
// method; the server (the process) serves the next request. The options are
// the ones the master's server is built with.
func TestGRPCHandlerPanicIsAnsweredInternal(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	g := grpc.NewServer(ops.NewMaster(reg).ServerOptions(log)...)
	apipb.RegisterCellServer(g, panickyCell{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := apipb.NewCellClient(cc)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := c.Status(ctx, &apipb.StatusRequest{}); status.Code(err) != codes.Internal {
			t.Fatalf("a panicking handler answered %v, want Internal", err)
		}
		if _, err := c.Get(ctx, &apipb.GetRequest{Job: "web"}); err != nil {
			t.Fatalf("after a panic, the next request failed: %v", err)
		}
	}
	stream, err := c.Watch(ctx, &apipb.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("a panicking stream ended with %v, want Internal", err)
	}
	if _, err := c.Get(ctx, &apipb.GetRequest{Job: "web"}); err != nil {
		t.Fatalf("after a stream's panic, the next request failed: %v", err)
	}
	if n := counterSum(t, reg, "corral_handler_panics_total"); n != 4 {
		t.Errorf("corral_handler_panics_total = %v, want 4", n)
	}
	out := logs.String()
	for _, want := range []string{"Cell/Status", "Cell/Watch", "index out of range", "watch went wrong", "goroutine"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
}

// A panic in an HTTP handler is answered 500 and logged with the request.
func TestHTTPHandlerPanicIsAnswered500(t *testing.T) {
	var logs testkit.SyncBuffer
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("page went wrong") })
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fine") })
	srv := httptest.NewServer(ops.NewRecovery(slog.New(slog.NewTextHandler(&logs, nil)), nil).Handler(mux))
	defer srv.Close()
	for i := 0; i < 2; i++ {
		resp, err := http.Get(srv.URL + "/boom")
		if err != nil {
			t.Fatalf("a panicking handler dropped the connection: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("a panicking handler answered %d, want 500", resp.StatusCode)
		}
		resp, err = http.Get(srv.URL + "/ok")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("after a panic: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if out := logs.String(); !strings.Contains(out, "/boom") || !strings.Contains(out, "page went wrong") {
		t.Errorf("the log does not name the request and the panic:\n%s", out)
	}
}

func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("%s is not registered", name)
	return 0
}
