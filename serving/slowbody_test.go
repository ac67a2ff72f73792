package serving

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSlowAndAbortedBodies covers defect 6 over a real TCP connection: a
// body trickled slower than Options.BodyReadTimeout gets 408 in bounded
// time; a body cut off by the client (connection closed mid-body) is logged
// and metered as 499, never as 200 nor as a 500 with an ERROR line.
func TestSlowAndAbortedBodies(t *testing.T) {
	env := newEnv(t, Options{BodyReadTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(env.http.URL, "http://")
	const body = `{"events":[{"id":"slow","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	head := func(n int) string {
		return fmt.Sprintf("POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testKey, n)
	}
	tests := []struct {
		name       string
		send       func(c net.Conn)
		wantStatus int // 0: no response expected
		logStatus  string
	}{
		{"trickled body", func(c net.Conn) {
			c.Write([]byte(head(len(body))))
			for i := 0; i < len(body); i++ {
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}, http.StatusRequestTimeout, "status=408"},
		{"body cut off", func(c net.Conn) {
			c.Write([]byte(head(len(body)) + body[:20]))
			time.Sleep(50 * time.Millisecond)
			c.(*net.TCPConn).CloseWrite()
		}, 0, "status=499"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(env.logBuf.String())
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			go tc.send(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if tc.wantStatus != 0 {
				if err != nil {
					t.Fatalf("no response: %v\n%s", err, env.logBuf.String()[before:])
				}
				res.Body.Close()
				if res.StatusCode != tc.wantStatus {
					t.Errorf("status = %d, want %d", res.StatusCode, tc.wantStatus)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("answered after %v, want about the body timeout", d)
				}
			}
			var logged string
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if logged = env.logBuf.String()[before:]; strings.Contains(logged, "http request") {
					break
				}
			}
			if !strings.Contains(logged, tc.logStatus) {
				t.Errorf("access log lacks %s:\n%s", tc.logStatus, logged)
			}
			if strings.Contains(logged, "level=ERROR") || strings.Contains(logged, "status=200") || strings.Contains(logged, "status=500") {
				t.Errorf("logged as an error or a success:\n%s", logged)
			}
		})
	}
	if got := env.srv.Store().NumEvents(); got != 0 {
		t.Errorf("%d events stored from incomplete bodies", got)
	}
}

// TestSlowBodyConnectionClosed (issue 48, defect 1): once a trickled body
// is answered 408, the server closes its connection, however the client
// goes on trickling; it does not read the rest of the body with no
// deadline. The same holds for a body refused before it is read (401).
func TestSlowBodyConnectionClosed(t *testing.T) {
	env := newEnv(t, Options{BodyReadTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(env.http.URL, "http://")
	const body = `{"events":[{"id":"slow","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	for _, tc := range []struct {
		name, key  string
		wantStatus int
	}{
		{"trickled past the body timeout", testKey, http.StatusRequestTimeout},
		{"refused before its body is read", "wrong-key-0123456789", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				tc.key, len(body))
			stop := make(chan struct{})
			defer close(stop)
			go func() { // one byte every 100 ms, for longer than the test waits
				for i := 0; i < len(body); i++ {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if _, err := c.Write([]byte{body[i]}); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != tc.wantStatus {
				t.Errorf("status = %d, want %d", res.StatusCode, tc.wantStatus)
			}
			answered := time.Now()
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, err := br.Read(make([]byte, 1))
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("connection still open %v after the %d answer (read %d bytes, %v), want it closed", time.Since(answered).Round(time.Millisecond), res.StatusCode, n, err)
			}
			if d := time.Since(answered); d > 2*time.Second {
				t.Errorf("connection closed %v after the answer, want at once", d)
			}
		})
	}
}

// TestSlowBodiesShutdown (issue 48, defect 1): a server draining with
// slow bodies in progress cuts their reads short and shuts down cleanly,
// in far less than the body timeout and within the shutdown timeout.
func TestSlowBodiesShutdown(t *testing.T) {
	rs := runServer(t, eventlogOptions(t.TempDir()),
		Options{BodyReadTimeout: time.Minute, ShutdownTimeout: 5 * time.Second, RatePerSecond: -1, Retrieval: defaultRetrieval()})
	const body = `{"events":[{"id":"e1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}]}`
	for range 5 {
		c, err := net.Dial("tcp", rs.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:5])
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	rs.cancel()
	select {
	case err := <-rs.done:
		if err != nil {
			t.Errorf("Run: %v, want a clean shutdown", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("shutdown took %v with 5 slow bodies, want well under the 5 s shutdown timeout", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of the shutdown")
	}
	if n := rs.srv.Store().NumEvents(); n != 0 {
		t.Errorf("%d events stored from cut bodies, want 0", n)
	}
}

// TestProtocolDetails covers defect 7's protocol items: 405 carries Allow,
// the bearer scheme is case-insensitive, and probes are not rate limited.
func TestProtocolDetails(t *testing.T) {
	env := newEnv(t, Options{RatePerSecond: 1, RateBurst: 2})
	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
		allow                    string
	}{
		{"405 lists the methods", http.MethodDelete, "/v1/model", "", 405, "GET"},
		{"405 on a POST route", http.MethodGet, "/v1/events", "", 405, "POST"},
		{"BEARER upper case", http.MethodPost, "/v1/model/train", "BEARER " + testKey, 503, ""},
		{"bearer lower case", http.MethodPost, "/v1/model/train", "bearer " + testKey, 503, ""},
		{"Basic is refused", http.MethodPost, "/v1/model/train", "Basic " + testKey, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, env.http.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			// The first requests of this table use the burst; later ones
			// may be limited: only probes are exempt.
			if res.StatusCode == http.StatusTooManyRequests {
				time.Sleep(time.Second)
				if res, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
			}
			if res.StatusCode != tc.want {
				t.Errorf("status = %d, want %d", res.StatusCode, tc.want)
			}
			if tc.allow != "" && !strings.Contains(res.Header.Get("Allow"), tc.allow) {
				t.Errorf("Allow = %q, want it to list %s", res.Header.Get("Allow"), tc.allow)
			}
		})
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		limited := 0
		for range 50 {
			res, err := http.Get(env.http.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests {
				limited++
			}
		}
		if limited > 0 {
			t.Errorf("%s: %d of 50 probes rate limited, want 0", path, limited)
		}
	}
	res, err := http.Get(env.http.URL + "/v1/model")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for range 5 {
		if res, err = http.Get(env.http.URL + "/v1/model"); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("reads past the burst = %d, want 429 (the limit must still apply)", res.StatusCode)
	}
}
