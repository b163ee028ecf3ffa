// edgestream: a KubeEdge v1.15 EdgeStream and the edged server it reaches,
// for cloudcore.rs. The tunnel side talks as EdgeStream does
// (edge/pkg/edgestream/edgestream.go and tunnel.go, pkg/stream/*.go at
// v1.15.0): it dials wss://ADDR/v1/kubeedge/connect with the node's client
// certificate (not checking the cloud's, as EdgeStream does not) and the
// headers SessionHostNameOverride and SessionInternalIP, pings every 5 s,
// reads each message as uvarint(connect id) uvarint(type) data, and
// serves LOGS_CONNECT with an HTTP GET whose body it relays in 256-byte
// DATA messages, EXEC_CONNECT and ATTACH_CONNECT by dialing the server,
// writing the request (Request.Write, as the SPDY round tripper's Dial
// does) and relaying the raw connection both ways; a connection that ends
// sends REMOVE_CONNECT, and a REMOVE_CONNECT from the cloud ends it.
//
// The server stands in for edged's kubelet API on 127.0.0.1:10350; it
// listens on a free port, and the peer dials it wherever the cloud's URL
// says 127.0.0.1:10350. Its pods have one container, "app":
// its log is "line 1" to "line 5" (tailLines honoured); an exec runs the
// command here, speaking v5.channel.k8s.io or v4.channel.k8s.io over a
// WebSocket (gorilla/websocket), with the exit status on the error
// channel as kubelet writes it; an attach writes "attached" and ends. Any
// other container is 404 "container not found".
//
// Usage: edgestream MODE ADDR CA_PEM CERT_PEM KEY_PEM NODE
// (MODE "v5": the server speaks v5.channel.k8s.io and v4.channel.k8s.io;
// "v4": v4 only, as kubelet before 1.30.)
//
// It prints "tunnel connected", then one line per request it serves.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// stream.MessageType, numbered as constants.go does.
const (
	logsConnect   uint64 = 0
	execConnect   uint64 = 1
	metricConnect uint64 = 2
	dataMessage   uint64 = 3
	removeConnect uint64 = 4
	closeConnect  uint64 = 5
	attachConnect uint64 = 6
)

// stream.Message.
type tunnelMessage struct {
	ConnectID uint64
	Type      uint64
	Data      []byte
}

// Message.Bytes: two uvarints and the data.
func (m *tunnelMessage) bytes() []byte {
	buf, offset := make([]byte, 16), 0
	offset += binary.PutUvarint(buf[offset:], m.ConnectID)
	offset += binary.PutUvarint(buf[offset:], m.Type)
	return append(buf[0:offset], m.Data...)
}

// ReadMessageFromTunnel.
func readTunnelMessage(r io.Reader) (*tunnelMessage, error) {
	buf := bufio.NewReader(r)
	id, err := binary.ReadUvarint(buf)
	if err != nil {
		return nil, err
	}
	kind, err := binary.ReadUvarint(buf)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(buf, 1<<20))
	if err != nil {
		return nil, err
	}
	return &tunnelMessage{ConnectID: id, Type: kind, Data: data}, nil
}

// EdgedLogsConnection / EdgedExecConnection / EdgedAttachConnection, as
// the edge unmarshals them.
type connector struct {
	MessID uint64
	URL    url.URL     `json:"url"`
	Header http.Header `json:"header"`
	Method string      `json:"method"`
}

// DefaultTunnel: one writer at a time, text messages.
type tunnel struct {
	mu   sync.Mutex
	conn *websocket.Conn
}

func (t *tunnel) write(m *tunnelMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn.WriteMessage(websocket.TextMessage, m.bytes())
}

var (
	edgedAddr string
	localMu   sync.Mutex
	local     = map[uint64]chan *tunnelMessage{}
	printMu   sync.Mutex
)

func say(f string, a ...interface{}) {
	printMu.Lock()
	defer printMu.Unlock()
	fmt.Printf(f+"\n", a...)
}

func main() {
	if len(os.Args) != 7 {
		fail("usage: edgestream MODE ADDR CA_PEM CERT_PEM KEY_PEM NODE")
	}
	mode, addr, certFile, keyFile, node := os.Args[1], os.Args[2], os.Args[4], os.Args[5], os.Args[6]
	protocols := []string{"v5.channel.k8s.io", "v4.channel.k8s.io"}
	if mode == "v4" {
		protocols = []string{"v4.channel.k8s.io"}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	edgedAddr = listener.Addr().String()
	go http.Serve(listener, edgedServer(protocols))

	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		fail("load key pair: %v", err)
	}
	dialer := websocket.Dialer{
		TLSClientConfig:  &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}},
		HandshakeTimeout: 30 * time.Second,
	}
	h := http.Header{}
	h.Add("SessionHostNameOverride", node)
	h.Add("SessionInternalIP", "127.0.0.1")
	u := url.URL{Scheme: "wss", Host: addr, Path: "/v1/kubeedge/connect"}
	var conn *websocket.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, resp, err := dialer.Dial(u.String(), h)
		if err == nil {
			conn = c
			break
		}
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			say("tunnel refused: %d %s (%v)", resp.StatusCode, strings.TrimSpace(string(body)), err)
		}
		if time.Now().After(deadline) {
			fail("dial %s: %v", u.String(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t := &tunnel{conn: conn}
	say("tunnel connected")
	go func() {
		for {
			time.Sleep(5 * time.Second)
			t.mu.Lock()
			err := conn.WriteControl(websocket.PingMessage, []byte("ping you"), time.Now().Add(time.Second))
			t.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			say("tunnel closed: %v", err)
			os.Exit(0)
		}
		m, err := readTunnelMessage(r)
		if err != nil {
			fail("read tunnel message: %v", err)
		}
		switch m.Type {
		case closeConnect:
			fail("close tunnel stream connection, error:%s", string(m.Data))
		case logsConnect, execConnect, attachConnect, metricConnect:
			ch := make(chan *tunnelMessage, 128)
			localMu.Lock()
			local[m.ConnectID] = ch
			localMu.Unlock()
			go serve(t, m, ch)
		case dataMessage, removeConnect:
			localMu.Lock()
			ch, ok := local[m.ConnectID]
			localMu.Unlock()
			if ok {
				ch <- m
			}
		default:
			say("wrong message type %d", m.Type)
		}
	}
}

// serve runs one connection, then forgets it (DeleteLocalConnection).
func serve(t *tunnel, m *tunnelMessage, ch chan *tunnelMessage) {
	defer func() {
		localMu.Lock()
		delete(local, m.ConnectID)
		localMu.Unlock()
	}()
	var c connector
	if err := json.Unmarshal(m.Data, &c); err != nil {
		say("FAIL unmarshal connector: %v", err)
		return
	}
	if c.MessID != m.ConnectID {
		say("FAIL MessID %d for connection %d", c.MessID, m.ConnectID)
	}
	// The cloud names edged's server; ours listens elsewhere.
	if c.URL.Host != "127.0.0.1:10350" || c.URL.Scheme != "http" {
		say("FAIL the cloud sent %s://%s, not edged's http://127.0.0.1:10350", c.URL.Scheme, c.URL.Host)
	}
	target := c.URL
	target.Host = edgedAddr
	switch m.Type {
	case logsConnect:
		say("logs request %s?%s", c.URL.Path, c.URL.RawQuery)
		serveLogs(t, m.ConnectID, target, c.Header, ch)
	case execConnect, attachConnect:
		say("exec request %s %s?%s protocols=%s", c.Method, c.URL.Path, c.URL.RawQuery, c.Header.Get("Sec-Websocket-Protocol"))
		serveRaw(t, m.ConnectID, target, c, ch)
	default:
		say("metrics request %s", c.URL.Path)
		serveMetrics(t, m.ConnectID, target, c.Header, ch)
	}
}

// EdgedMetricsConnection.Serve: the body, a line a message, then
// REMOVE_CONNECT.
func serveMetrics(t *tunnel, id uint64, target url.URL, h http.Header, ch chan *tunnelMessage) {
	req, err := http.NewRequest(http.MethodGet, target.String(), nil)
	if err != nil {
		say("FAIL metrics request: %v", err)
		return
	}
	req.Header = h
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("accept-encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		say("metrics request failed: %v", err)
		return
	}
	defer resp.Body.Close()
	go func() {
		for range ch {
		}
	}()
	scan := bufio.NewScanner(resp.Body)
	for scan.Scan() {
		if t.write(&tunnelMessage{ConnectID: id, Type: dataMessage, Data: append(scan.Bytes(), 10)}) != nil {
			return
		}
	}
	remove(t, id)
}

func remove(t *tunnel, id uint64) {
	for retry := 0; retry < 3; retry++ {
		if t.write(&tunnelMessage{ConnectID: id, Type: removeConnect}) == nil {
			return
		}
	}
}

// EdgedLogsConnection.Serve: the body, 256 bytes a message.
func serveLogs(t *tunnel, id uint64, target url.URL, h http.Header, ch chan *tunnelMessage) {
	req, err := http.NewRequest(http.MethodGet, target.String(), nil)
	if err != nil {
		say("FAIL logs request: %v", err)
		return
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		say("logs request failed: %v", err)
		return
	}
	defer resp.Body.Close()
	stop := make(chan struct{}, 2)
	go func() {
		for m := range ch {
			if m.Type == removeConnect {
				stop <- struct{}{}
				return
			}
		}
	}()
	go func() {
		defer func() { stop <- struct{}{} }()
		var data [256]byte
		for {
			n, err := resp.Body.Read(data[:])
			if n > 0 {
				d := append([]byte(nil), data[:n]...)
				if t.write(&tunnelMessage{ConnectID: id, Type: dataMessage, Data: d}) != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	<-stop
	remove(t, id)
}

// EdgedExecConnection.Serve: the raw connection to the server, both ways.
func serveRaw(t *tunnel, id uint64, target url.URL, c connector, ch chan *tunnelMessage) {
	req, err := http.NewRequest(c.Method, target.String(), nil)
	if err != nil {
		say("FAIL exec request: %v", err)
		return
	}
	req.Header = c.Header
	conn, err := net.Dial("tcp", target.Host)
	if err != nil {
		say("dial edged: %v", err)
		return
	}
	defer conn.Close()
	if err := req.Write(conn); err != nil {
		say("write request: %v", err)
		return
	}
	stop := make(chan struct{}, 2)
	go func() {
		for m := range ch {
			switch m.Type {
			case removeConnect:
				stop <- struct{}{}
				return
			case dataMessage:
				conn.Write(m.Data)
			}
		}
	}()
	go func() {
		defer func() { stop <- struct{}{} }()
		var data [256]byte
		for {
			n, err := conn.Read(data[:])
			if n > 0 {
				d := append([]byte(nil), data[:n]...)
				if t.write(&tunnelMessage{ConnectID: id, Type: dataMessage, Data: d}) != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	<-stop
	remove(t, id)
}

// The kubelet API of edged, for one pod.
func edgedServer(protocols []string) http.Handler {
	mux := http.NewServeMux()
	parts := func(r *http.Request, prefix string) []string {
		return strings.Split(strings.TrimPrefix(r.URL.Path, prefix), "/")
	}
	known := func(w http.ResponseWriter, p []string) bool {
		if len(p) != 3 || p[2] != "app" {
			name := ""
			if len(p) > 2 {
				name = p[2]
			}
			http.Error(w, fmt.Sprintf("container not found (%q)", name), http.StatusNotFound)
			return false
		}
		return true
	}
	mux.HandleFunc("/containerLogs/", func(w http.ResponseWriter, r *http.Request) {
		if !known(w, parts(r, "/containerLogs/")) {
			return
		}
		lines := []string{"line 1", "line 2", "line 3", "line 4", "line 5"}
		if tail := r.URL.Query().Get("tailLines"); tail != "" {
			n, _ := strconv.Atoi(tail)
			if n < len(lines) {
				lines = lines[len(lines)-n:]
			}
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	})
	// kubelet's Summary API: the node and the pod's "app" container.
	mux.HandleFunc("/stats/summary", func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UTC().Format(time.RFC3339)
		usage := func(cores, bytes int) map[string]interface{} {
			return map[string]interface{}{
				"cpu":    map[string]interface{}{"time": now, "usageNanoCores": cores, "usageCoreNanoSeconds": cores * 100},
				"memory": map[string]interface{}{"time": now, "workingSetBytes": bytes},
			}
		}
		node := usage(250000000, 512*1024*1024)
		node["nodeName"] = "edge"
		app := usage(20000000, 8*1024*1024)
		app["name"] = "app"
		pod := usage(20000000, 8*1024*1024)
		pod["podRef"] = map[string]string{"name": "web", "namespace": "default", "uid": ""}
		pod["containers"] = []interface{}{app}
		json.NewEncoder(w).Encode(map[string]interface{}{"node": node, "pods": []interface{}{pod}})
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	})
	upgrader := websocket.Upgrader{Subprotocols: protocols}
	mux.HandleFunc("/exec/", func(w http.ResponseWriter, r *http.Request) {
		if !known(w, parts(r, "/exec/")) {
			return
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			say("FAIL upgrade: %v", err)
			return
		}
		say("exec protocol %s", ws.Subprotocol())
		runExec(ws, r.URL.Query())
	})
	mux.HandleFunc("/attach/", func(w http.ResponseWriter, r *http.Request) {
		if !known(w, parts(r, "/attach/")) {
			return
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		ws.WriteMessage(websocket.BinaryMessage, append([]byte{1}, "attached\n"...))
		ws.WriteMessage(websocket.BinaryMessage, append([]byte{3}, `{"metadata":{},"status":"Success"}`...))
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		ws.Close()
	})
	return mux
}

// An exec as kubelet's remote command server runs it: channel 0 to the
// process's stdin (v5: closed by a 255 message), 1 and 2 from its outputs,
// its exit status on 3, then the WebSocket closes.
func runExec(ws *websocket.Conn, q url.Values) {
	var wmu sync.Mutex
	send := func(ch byte, b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		ws.WriteMessage(websocket.BinaryMessage, append([]byte{ch}, b...))
	}
	command := q["command"]
	if len(command) == 0 {
		send(3, []byte(`{"metadata":{},"status":"Failure","message":"no command"}`))
		ws.Close()
		return
	}
	cmd := exec.Command(command[0], command[1:]...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		send(3, []byte(fmt.Sprintf(`{"metadata":{},"status":"Failure","message":%q}`, err.Error())))
		ws.Close()
		return
	}
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				stdin.Close()
				return
			}
			if len(b) == 0 {
				continue
			}
			switch b[0] {
			case 0:
				stdin.Write(b[1:])
			case 255:
				if len(b) > 1 && b[1] == 0 {
					stdin.Close()
				}
			}
		}
	}()
	var outputs sync.WaitGroup
	copyOut := func(ch byte, r io.Reader) {
		defer outputs.Done()
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				send(ch, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	outputs.Add(2)
	go copyOut(1, stdout)
	go copyOut(2, stderr)
	outputs.Wait()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		send(3, []byte(`{"metadata":{},"status":"Success"}`))
	case errors.As(err, &exitErr):
		code := exitErr.ExitCode()
		status := map[string]interface{}{
			"metadata": map[string]interface{}{},
			"status":   "Failure",
			"message":  fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
			"reason":   "NonZeroExitCode",
			"details": map[string]interface{}{
				"causes": []interface{}{map[string]interface{}{"reason": "ExitCode", "message": strconv.Itoa(code)}},
			},
		}
		b, _ := json.Marshal(status)
		send(3, b)
	default:
		send(3, []byte(fmt.Sprintf(`{"metadata":{},"status":"Failure","message":%q}`, err.Error())))
	}
	say("exec done %v", err)
	wmu.Lock()
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	wmu.Unlock()
	ws.Close()
}
