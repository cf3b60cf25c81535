package auth_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// rawCodec sends bytes as they are, so a test can send what no protobuf
// library would encode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

// submitRaw sends raw bytes as a SubmitRequest over alice's connection.
func (c *cell) submitRaw(conn *grpc.ClientConn, raw []byte) error {
	var out []byte
	return conn.Invoke(context.Background(), "/corral.api.v1.Cell/Submit", &raw, &out, grpc.ForceCodec(rawCodec{}))
}

// TestBadRequestsChangeNothing: an oversized request, invalid UTF-8, a
// message nested past any sane depth, and specs that break the rules each
// get a clear error, and the log does not move.
func TestBadRequestsChangeNothing(t *testing.T) {
	c := newCell(t, cellOptions{})
	cert, key, err := c.local.Cell.Issue(auth.RoleUser, "alice")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := auth.ClientOptions{CAFile: c.local.CA, CertFile: cert, KeyFile: key}.DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.addr, append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	alice := apipb.NewCellClient(conn)

	valid, err := proto.Marshal(&apipb.SubmitRequest{RequestId: "ok", Spec: spec("ok")})
	if err != nil {
		t.Fatal(err)
	}
	// request_id (field 1) holding bytes that are not UTF-8.
	specOnly, err := proto.Marshal(&apipb.SubmitRequest{Spec: spec("utf")})
	if err != nil {
		t.Fatal(err)
	}
	badUTF8 := protowire.AppendTag(nil, 1, protowire.BytesType)
	badUTF8 = protowire.AppendBytes(badUTF8, []byte("id-\xff\xfe"))
	badUTF8 = append(badUTF8, specOnly...)
	// 20,000 nested groups of an unknown field.
	var deep []byte
	for i := 0; i < 20000; i++ {
		deep = protowire.AppendTag(deep, 99, protowire.StartGroupType)
	}
	for i := 0; i < 20000; i++ {
		deep = protowire.AppendTag(deep, 99, protowire.EndGroupType)
	}
	deep = append(bytes.Clone(valid), deep...)
	for _, tc := range []struct {
		name string
		send func() error
		want codes.Code
		says string
	}{
		{"5 MiB request", func() error {
			_, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "big", Spec: spec("big", func(s *events.JobSpec) {
				s.Args = []string{strings.Repeat("x", 5<<20)}
			})})
			return err
		}, codes.ResourceExhausted, "larger than max"},
		{"invalid UTF-8", func() error { return c.submitRaw(conn, badUTF8) }, codes.Internal, "invalid UTF-8"},
		{"nested 20,000 deep", func() error { return c.submitRaw(conn, deep) }, codes.Internal, "unmarshal"},
		{"not protobuf at all", func() error { return c.submitRaw(conn, []byte{0xff, 0xff, 0xff}) }, codes.Internal, "unmarshal"},
		{"argument too long", func() error {
			_, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "arg", Spec: spec("arg", func(s *events.JobSpec) {
				s.Args = []string{strings.Repeat("x", 5000)}
			})})
			return err
		}, codes.InvalidArgument, "args[0]: longer than 4096 bytes"},
		{"no spec", func() error {
			_, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "none"})
			return err
		}, codes.InvalidArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.head()
			err := tc.send()
			if code(err) != tc.want || !strings.Contains(errString(err), tc.says) {
				t.Errorf("%v; want %v saying %q", err, tc.want, tc.says)
			}
			if c.head() != before {
				t.Errorf("the log moved by %d", c.head()-before)
			}
		})
	}
	// The connection and the master serve on.
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "after", Spec: spec("after")}); err != nil {
		t.Errorf("a good request after the bad ones: %v", err)
	}
}
