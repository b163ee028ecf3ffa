// edgecore: a KubeEdge v1.15 EdgeCore as the cloud sees it, for
// cloudcore.rs. It talks as EdgeHub does (Go, gorilla/websocket,
// crypto/tls, the message JSON of beehive's model.Message) and reads every
// answer the way EdgeCore's MetaManager and its metaclient read them
// (edge/pkg/metamanager/process.go and client/*.go at v1.15.0), with
// minimal copies of the Kubernetes types they decode into. It prints one
// line per fact the test checks; a line starting "FAIL" or "MISREAD" means
// EdgeCore would have misunderstood the cloud.
//
// Usage: edgecore MODE ADDR CA_PEM CERT_PEM KEY_PEM NODE
//
// MODE "edged": what EdgeCore with edged enabled sends besides status:
// kubelet's Lease (read, create on NotFound, renew, read again), a read of
// another node's Lease, a read of its Node, a read of a configmap no pod
// of it uses, the deletion of the first pod the cloud marks terminating
// (then again, as after a lost answer), and the deletion of pod
// "elsewhere", another node's. Then it prints "done" and exits.
//
// MODE "quiet": EdgeCore with edged disabled: keepalives and ACKs only,
// printing each downstream message, until killed.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// contentData is beehive's GetContentData: a string is the raw payload,
// anything else is marshalled again.
func (m *message) contentData() []byte {
	if s, ok := m.Content.(string); ok {
		return []byte(s)
	}
	b, _ := json.Marshal(m.Content)
	return b
}

// The parts of the Kubernetes types EdgeCore decodes into.
type objectMeta struct {
	Name              string  `json:"name,omitempty"`
	Namespace         string  `json:"namespace,omitempty"`
	UID               string  `json:"uid,omitempty"`
	ResourceVersion   string  `json:"resourceVersion,omitempty"`
	DeletionTimestamp *string `json:"deletionTimestamp,omitempty"`
}

type statusDetails struct {
	Name  string `json:"name,omitempty"`
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// metav1.Status
type status struct {
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Details *statusDetails `json:"details,omitempty"`
	Code    int32          `json:"code,omitempty"`
}

// apierrors.StatusError
type statusError struct {
	ErrStatus status
}

func (e *statusError) Error() string { return e.ErrStatus.Message }

func reasonOf(err error) string {
	var se *statusError
	if errors.As(err, &se) {
		return se.ErrStatus.Reason
	}
	return ""
}

type leaseSpec struct {
	HolderIdentity       *string `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds *int32  `json:"leaseDurationSeconds,omitempty"`
	RenewTime            *string `json:"renewTime,omitempty"`
}

type lease struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   objectMeta `json:"metadata"`
	Spec       leaseSpec  `json:"spec"`
}

// client.LeaseResp
type leaseResp struct {
	Object *lease
	Err    statusError
}

type configMap struct {
	Metadata objectMeta        `json:"metadata"`
	Data     map[string]string `json:"data,omitempty"`
}

type node struct {
	Metadata objectMeta `json:"metadata"`
}

type peer struct {
	conn    *websocket.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[string]chan message
	// Pods the cloud marked terminating, by name.
	terminating chan objectMeta
}

func (p *peer) write(m message) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.conn.SetWriteDeadline(time.Now().Add(15 * time.Second))
	return p.conn.WriteJSON(m)
}

// read routes as EdgeHub does: a message with a parent is a reply to the
// request waiting for it; anything else goes to MetaManager, which stores
// it and answers "OK".
func (p *peer) read() {
	for {
		var m message
		if err := p.conn.ReadJSON(&m); err != nil {
			fail("read: %v", err)
		}
		if m.Header.ParentID != "" {
			p.mu.Lock()
			ch := p.pending[m.Header.ParentID]
			delete(p.pending, m.Header.ParentID)
			p.mu.Unlock()
			if ch != nil {
				ch <- m
			} else {
				fmt.Printf("reply nobody waits for: %s %s\n", m.Router.Operation, m.Router.Resource)
			}
			continue
		}
		fmt.Printf("downstream %s %s\n", m.Router.Operation, m.Router.Resource)
		parts := strings.Split(m.Router.Resource, "/")
		if len(parts) == 3 && parts[1] != "pod" && parts[1] != "configmap" && parts[1] != "secret" {
			// edged's log line for what it cannot use, and MetaManager
			// keeps a stray row for it.
			fmt.Printf("resType is not pod or configmap or secret or volume: resType is %s\n", parts[1])
		}
		if len(parts) == 3 && parts[1] == "pod" && m.Router.Operation == "update" {
			var pod struct {
				Metadata objectMeta `json:"metadata"`
			}
			if json.Unmarshal(m.contentData(), &pod) == nil && pod.Metadata.DeletionTimestamp != nil {
				select {
				case p.terminating <- pod.Metadata:
				default:
				}
			}
		}
		if (m.Router.Operation == "insert" || m.Router.Operation == "update") && len(parts) == 3 && parts[1] == "pod" {
			var pod struct {
				Metadata objectMeta `json:"metadata"`
			}
			json.Unmarshal(m.contentData(), &pod)
			fmt.Printf("got pod %s uid=%s\n", m.Router.Resource, pod.Metadata.UID)
		}
		ack := message{Header: header{ID: uuid(), ParentID: m.Header.ID, Timestamp: now()},
			Router:  route{Source: m.Router.Source, Group: m.Router.Group, Operation: "response", Resource: m.Router.Resource},
			Content: "OK"}
		if err := p.write(ack); err != nil {
			fail("write ack: %v", err)
		}
	}
}

// request sends what edged's metaclient hands MetaManager and waits for the
// cloud's reply (MetaManager's remoteQueryTimeout is 60 s).
func (p *peer) request(operation, resource string, content interface{}) message {
	m := message{Header: header{ID: uuid(), Timestamp: now()},
		Router:  route{Source: "edged", Group: "meta", Operation: operation, Resource: resource},
		Content: content}
	ch := make(chan message, 1)
	p.mu.Lock()
	p.pending[m.Header.ID] = ch
	p.mu.Unlock()
	if err := p.write(m); err != nil {
		fail("write %s %s: %v", operation, resource, err)
	}
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		fail("no answer to %s %s", operation, resource)
	}
	return message{}
}

// remote is MetaManager's processRemote: the reply goes to edged, and an
// "OK" for the reply goes back to the cloud.
func (p *peer) remote(operation, resource string, content interface{}) message {
	r := p.request(operation, resource, content)
	ack := message{Header: header{ID: uuid(), ParentID: r.Header.ID, Timestamp: now()},
		Router:  route{Source: r.Router.Source, Group: r.Router.Group, Operation: "response", Resource: r.Router.Resource},
		Content: "OK"}
	if err := p.write(ack); err != nil {
		fail("write ack of a reply: %v", err)
	}
	return r
}

// handleLeaseResp, as client/lease.go.
func handleLeaseResp(content []byte) (*lease, error) {
	var resp leaseResp
	if err := json.Unmarshal(content, &resp); err != nil {
		return nil, fmt.Errorf("unmarshal message to lease failed, err: %v", err)
	}
	if reflect.DeepEqual(resp.Err, statusError{}) {
		return resp.Object, nil
	}
	return resp.Object, &resp.Err
}

func (p *peer) lease(operation, name string, body interface{}) (*lease, error) {
	r := p.remote(operation, "kube-node-lease/lease/"+name, body)
	return handleLeaseResp(r.contentData())
}

func renewTime() *string {
	t := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	return &t
}

func edged(p *peer, name string) {
	// kubelet's lease controller: read, create on NotFound, renew.
	l, err := p.lease("query", name, nil)
	if reasonOf(err) != "NotFound" {
		fail("lease query: want NotFound, got %v (%v)", err, l)
	}
	fmt.Println("lease not found")
	duration := int32(40)
	holder := name
	fresh := lease{Metadata: objectMeta{Name: name, Namespace: "kube-node-lease"},
		Spec: leaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: renewTime()}}
	l, err = p.lease("insert", name, fresh)
	if err != nil || l == nil {
		fail("lease insert: %v", err)
	}
	fmt.Printf("lease created rv=%s\n", l.Metadata.ResourceVersion)
	l.Spec.RenewTime = renewTime()
	l, err = p.lease("update", name, l)
	if err != nil || l == nil {
		fail("lease update: %v", err)
	}
	fmt.Println("lease renewed")
	l, err = p.lease("query", name, nil)
	if err != nil || l == nil || l.Spec.HolderIdentity == nil {
		fail("lease query: %v %v", err, l)
	}
	fmt.Printf("lease found holder=%s kind=%s\n", *l.Spec.HolderIdentity, l.Kind)
	_, err = p.lease("query", "not-"+name, nil)
	if err == nil {
		fail("MISREAD another node's lease as success")
	}
	fmt.Printf("lease of another node: %s\n", reasonOf(err))

	// client/node.go Get: the reply, decoded as a Node.
	r := p.remote("query", "default/node/"+name, nil)
	var n node
	if err := json.Unmarshal(r.contentData(), &n); err != nil {
		fail("node query: %v", err)
	}
	fmt.Printf("node query name=%s\n", n.Metadata.Name)

	// client/configmap.go Get: a configmap no pod of this node uses.
	r = p.remote("query", "default/configmap/not-mine", nil)
	var cm configMap
	if err := json.Unmarshal(r.contentData(), &cm); err != nil {
		fmt.Println("configmap query refused")
	} else {
		fmt.Printf("MISREAD configmap query as %+v\n", cm)
	}

	// kubelet's status manager, once the containers of a terminating pod
	// stopped: client/pod.go Delete, "OK" or an error.
	fmt.Println("waiting for a terminating pod")
	var pod objectMeta
	select {
	case pod = <-p.terminating:
	case <-time.After(60 * time.Second):
		fail("no pod marked terminating")
	}
	opts := map[string]interface{}{"gracePeriodSeconds": 0, "preconditions": map[string]string{"uid": pod.UID}}
	for _, what := range []string{"pod delete", "pod delete retry"} {
		r := p.request("delete", "default/pod/"+pod.Name, opts)
		if s, ok := r.Content.(string); ok && s == "OK" {
			fmt.Printf("%s: OK\n", what)
		} else {
			fail("%s: delete pod failed, response content type unsupported: %v", what, r.Content)
		}
	}
	// Another node's pod "elsewhere": anything but "OK" is a failure to
	// EdgeCore.
	r = p.request("delete", "default/pod/elsewhere", map[string]interface{}{"gracePeriodSeconds": 0})
	if s, ok := r.Content.(string); ok && s == "OK" {
		fmt.Println("MISREAD the delete of another node's pod as success")
	} else {
		fmt.Println("delete of another node's pod: refused")
	}
	fmt.Println("done")
}

func main() {
	if len(os.Args) != 7 {
		fail("usage: edgecore MODE ADDR CA CERT KEY NODE")
	}
	mode, addr, caFile, certFile, keyFile, name := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6]
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
	dialer := websocket.Dialer{
		TLSClientConfig:  &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		HandshakeTimeout: 30 * time.Second,
	}
	h := http.Header{}
	h.Set("node_id", name)
	h.Set("project_id", project)
	h.Set("ConnectionUse", "msg")
	url := fmt.Sprintf("wss://%s/%s/%s/events", addr, project, name)
	conn, _, err := dialer.Dial(url, h)
	if err != nil {
		fail("dial %s: %v", url, err)
	}
	p := &peer{conn: conn, pending: map[string]chan message{}, terminating: make(chan objectMeta, 16)}
	go func() {
		for {
			keepalive := message{Header: header{ID: uuid(), Timestamp: now()},
				Router: route{Source: "websocket", Group: "resource", Operation: "keepalive", Resource: "node"}, Content: "ping"}
			if err := p.write(keepalive); err != nil {
				fail("write keepalive: %v", err)
			}
			time.Sleep(time.Second)
		}
	}()
	go p.read()
	fmt.Println("connected")
	switch mode {
	case "edged":
		edged(p, name)
	case "quiet":
		select {}
	default:
		fail("unknown mode %q", mode)
	}
	p.wmu.Lock()
	conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	p.wmu.Unlock()
}
