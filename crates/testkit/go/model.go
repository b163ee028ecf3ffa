// model.go: KubeEdge beehive's model.Message as the Go peers of the tests
// write and read it (field for field, with encoding/json's tags), and the
// helpers every peer uses. Built into each peer program by
// edgehive_testkit::go::build.
package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"
)

// The message header.
type header struct {
	ID              string `json:"msg_id"`
	ParentID        string `json:"parent_msg_id,omitempty"`
	Timestamp       int64  `json:"timestamp"`
	ResourceVersion string `json:"resourceversion,omitempty"`
	Sync            bool   `json:"sync,omitempty"`
	MessageType     string `json:"type,omitempty"`
}

// The message route.
type route struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
	Group       string `json:"group,omitempty"`
	Operation   string `json:"operation,omitempty"`
	Resource    string `json:"resource,omitempty"`
}

// beehive's model.Message.
type message struct {
	Header  header      `json:"header"`
	Router  route       `json:"route,omitempty"`
	Content interface{} `json:"content"`
}

// A version 4 UUID, as beehive's NewMessage makes message ids.
func uuid() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Unix time in milliseconds, beehive's timestamp.
func now() int64 { return time.Now().UnixNano() / 1e6 }

// Prints the reason and ends the peer with status 1.
func fail(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}
