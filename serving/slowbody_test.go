package serving

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
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
