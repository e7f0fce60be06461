package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
)

func TestFloorHeads(t *testing.T) {
	const (
		get      = "GET /1k.bin HTTP/1.1\r\nHost: a\r\n\r\n"
		getClose = "GET /1k.bin HTTP/1.1\r\nHost: a\r\nconnection: Close\r\n\r\n"
	)
	for _, tc := range []struct {
		name      string
		head      string
		wantDrop  string
		wantClose bool
	}{
		{"keep-alive", get, get, false},
		{"close", getClose, get, true},
		{"keep-alive said", "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", false},
		{"name is a prefix", "GET / HTTP/1.1\r\nConnectionx: close\r\n\r\n", "GET / HTTP/1.1\r\nConnectionx: close\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, closed := dropConnectionClose(nil, []byte(tc.head))
			if string(got) != tc.wantDrop || closed != tc.wantClose {
				t.Errorf("got %q, %v, want %q, %v", got, closed, tc.wantDrop, tc.wantClose)
			}
		})
	}

	for _, tc := range []struct {
		name, head string
		wantLen    int64
		wantSet    string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n", 1024,
			"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nConnection: close\r\n\r\n"},
		{"no length", "HTTP/1.1 200 OK\r\n\r\n", -1, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := contentLength([]byte(tc.head)); got != tc.wantLen {
				t.Errorf("contentLength: got %d, want %d", got, tc.wantLen)
			}
			if got := setConnectionClose(nil, []byte(tc.head)); string(got) != tc.wantSet {
				t.Errorf("setConnectionClose: got %q, want %q", got, tc.wantSet)
			}
		})
	}
}

// TestFloorExchange relays one response over in-memory connections, as
// each proxy sees it.
func TestFloorExchange(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello"
	for _, tc := range []struct {
		name        string
		parse       bool
		closeClient bool
		want        string
	}{
		{"scan", false, false, resp},
		{"scan, close", false, true, strings.Replace(resp, "keep-alive", "close", 1)},
		{"parse", true, false, resp},
		{"parse, close", true, true, strings.Replace(resp, "keep-alive", "close", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, clientPeer := net.Pipe()
			backend, backendPeer := net.Pipe()
			defer client.Close()
			defer backend.Close()
			const req = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
			go func() {
				head, err := peekHead(bufio.NewReader(backendPeer))
				if err == nil && string(head) == req {
					io.WriteString(backendPeer, resp)
				}
				backendPeer.Close()
			}()
			got := make(chan string)
			go func() {
				b, _ := io.ReadAll(clientPeer)
				got <- string(b)
			}()
			p := &floorProxy{parse: tc.parse}
			be := &backendConn{conn: backend, br: bufio.NewReader(backend)}
			var buf []byte
			keep, err := p.exchange(client, be, []byte(req), &buf, tc.closeClient)
			client.Close()
			if err != nil || !keep {
				t.Fatalf("exchange: keep %v, err %v; want true, nil", keep, err)
			}
			if g := <-got; g != tc.want {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
	}
}
