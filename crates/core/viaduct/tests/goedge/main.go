// goedge: a minimal edge written the way KubeEdge v1.15's EdgeHub talks to
// CloudHub (Go, gorilla/websocket, crypto/tls), used by go_peer.rs to show
// that a Go peer joins an edgehive cloud and exchanges messages.
//
// Usage: goedge ADDR CA_PEM CERT_PEM KEY_PEM NODE COUNT
// It sends a keepalive, then answers COUNT downstream messages with an "OK"
// response, printing "ack RESOURCE" for each, and exits.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	if len(os.Args) != 7 {
		fail("usage: goedge ADDR CA CERT KEY NODE COUNT")
	}
	addr, caFile, certFile, keyFile, node := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	count, _ := strconv.Atoi(os.Args[6])
	project := "e632aba927ea4ac2b575ec1603d56f10"

	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		fail("read CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		fail("load key pair: %v", err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if os.Getenv("GOEDGE_TLS12") == "1" {
		// Go's default TLS 1.2 suites, as a v1.15 EdgeCore offers them.
		tlsCfg.MaxVersion = tls.VersionTLS12
	}
	dialer := websocket.Dialer{
		TLSClientConfig:  tlsCfg,
		HandshakeTimeout: 30 * time.Second,
	}
	h := http.Header{}
	h.Set("node_id", node)
	h.Set("project_id", project)
	h.Set("ConnectionUse", "msg")
	url := fmt.Sprintf("wss://%s/%s/%s/events", addr, project, node)
	conn, resp, err := dialer.Dial(url, h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		fail("dial %s: %v (status %d)", url, err, status)
	}
	defer conn.Close()
	fmt.Printf("tls %x\n", conn.UnderlyingConn().(*tls.Conn).ConnectionState().Version)

	keepalive := message{Header: header{ID: uuid(), Timestamp: now()},
		Router: route{Source: "websocket", Group: "resource", Operation: "keepalive", Resource: "node"}, Content: "ping"}
	if err := conn.WriteJSON(keepalive); err != nil {
		fail("write keepalive: %v", err)
	}
	for i := 0; i < count; i++ {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var m message
		if err := conn.ReadJSON(&m); err != nil {
			fail("read: %v", err)
		}
		ack := message{Header: header{ID: uuid(), ParentID: m.Header.ID, Timestamp: now(), MessageType: m.Header.MessageType},
			Router: route{Source: m.Router.Source, Group: m.Router.Group, Operation: "response", Resource: m.Router.Resource}, Content: "OK"}
		if err := conn.WriteJSON(ack); err != nil {
			fail("write ack: %v", err)
		}
		fmt.Printf("ack %s rv=%s\n", m.Router.Resource, m.Header.ResourceVersion)
	}
	conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}
