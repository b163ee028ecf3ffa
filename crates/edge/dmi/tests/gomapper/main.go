// A DMI mapper on grpc-go, as KubeEdge's mapper framework builds one (a
// grpc.Dial over the unix socket, insecure, and a grpc.Server of its own for
// DeviceMapperService), with the messages encoded by hand (no generated
// code). It registers with data, reports a twin of `device`, reports one of
// a device the edge does not have, prints what it learns, and serves the
// edge's calls until its standard input closes.
//
// Usage: gomapper DMI_SOCK OWN_SOCK PROTOCOL DEVICE
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/ioutil"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
)

// rawCodec passes the bytes the program encodes itself.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string   { return "proto" }
func (rawCodec) String() string { return "proto" }

func lenField(num int, b []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(num<<3|2))
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

func strField(num int, s string) []byte { return lenField(num, []byte(s)) }

func boolField(num int, v bool) []byte {
	out := binary.AppendUvarint(nil, uint64(num<<3))
	if v {
		return append(out, 1)
	}
	return append(out, 0)
}

func join(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// names reads the messages in field `num` of `b` and returns each one's
// field 1 (a name).
func names(b []byte, num int) []string {
	var out []string
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		b = b[n:]
		if key&7 != 2 {
			_, n := binary.Uvarint(b)
			b = b[n:]
			continue
		}
		l, n := binary.Uvarint(b)
		body := b[n : n+int(l)]
		b = b[n+int(l):]
		if int(key>>3) != num {
			continue
		}
		for len(body) > 0 {
			k, n := binary.Uvarint(body)
			body = body[n:]
			if k&7 != 2 {
				_, n := binary.Uvarint(body)
				body = body[n:]
				continue
			}
			ll, n := binary.Uvarint(body)
			if k == 1<<3|2 {
				out = append(out, string(body[n:n+int(ll)]))
			}
			body = body[n+int(ll):]
		}
	}
	return out
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: gomapper DMI_SOCK OWN_SOCK PROTOCOL DEVICE")
	}
	dmi, own, protocol, device := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	os.Remove(own)
	lis, err := net.Listen("unix", own)
	if err != nil {
		fail("listen: %v", err)
	}
	srv := grpc.NewServer(grpc.CustomCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ interface{}, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var in []byte
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		fmt.Printf("CALL %s %v\n", method, names(in, 1))
		out := []byte{}
		return stream.SendMsg(&out)
	}))
	go srv.Serve(lis)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "passthrough:///dmi", grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", dmi)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		fail("dial: %v", err)
	}
	mapper := join(strField(1, "go-mapper"), strField(2, "v1.15.0"), strField(3, "v1beta1"),
		strField(4, protocol), strField(5, own), strField(6, "ok"))
	req := join(boolField(1, true), lenField(2, mapper))
	var resp []byte
	if err := conn.Invoke(ctx, "/v1beta1.DeviceManagerService/MapperRegister", &req, &resp); err != nil {
		fail("register: %v", err)
	}
	fmt.Printf("REGISTERED models=%v devices=%v\n", names(resp, 1), names(resp, 2))

	// A twin as the framework reports it: values with metadata maps.
	meta := join(strField(1, "timestamp"), strField(2, "1700000000000"))
	value := func(v string) []byte { return join(strField(1, v), lenField(2, meta)) }
	twin := join(strField(1, "temperature"), lenField(2, value("20")), lenField(3, value("21.5")))
	report := join(strField(1, device), lenField(2, lenField(1, twin)))
	if err := conn.Invoke(ctx, "/v1beta1.DeviceManagerService/ReportDeviceStatus", &report, &resp); err != nil {
		fail("report: %v", err)
	}
	fmt.Println("REPORTED")
	unknown := join(strField(1, "no-such-device"), lenField(2, lenField(1, twin)))
	err = conn.Invoke(ctx, "/v1beta1.DeviceManagerService/ReportDeviceStatus", &unknown, &resp)
	fmt.Printf("UNKNOWN %v\n", err)

	io.Copy(ioutil.Discard, os.Stdin)
	srv.Stop()
}
