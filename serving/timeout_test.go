package serving

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/serving/middleware"
)

// TestTimeoutAnswersAtBudget (issue 48, defect 7): a request still being
// handled when Options.RequestTimeout passes is answered 503 (type
// timeout, Retry-After) at once, while its handler, which ignores its
// context, is still running; the handler's late answer is dropped. An
// answer within the budget passes whole, with its status and headers.
func TestTimeoutAnswersAtBudget(t *testing.T) {
	env := newEnv(t, Options{})
	release := make(chan struct{})
	finished := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(finished)
		<-release // ignores r.Context(), as a stage that does not check it
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"late":true}`)
	})
	hs := httptest.NewServer(middleware.RequestID(middleware.Timeout(100*time.Millisecond, env.srv.writeProblem)(slow)))
	defer hs.Close()
	res, err := http.Get(hs.URL + "/v1/retrieve")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	select {
	case <-finished:
		t.Fatal("the answer waited for the handler")
	default:
	}
	var p struct{ Type, Detail string }
	if err := json.Unmarshal(body, &p); err != nil || res.StatusCode != http.StatusServiceUnavailable ||
		!strings.HasSuffix(p.Type, "/timeout") || res.Header.Get("Retry-After") == "" {
		t.Errorf("answer = %d %s (Retry-After %q), want 503 type timeout with Retry-After", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	close(release)
	<-finished

	fast := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "kept")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "short and stout")
	})
	hs2 := httptest.NewServer(middleware.Timeout(time.Minute, env.srv.writeProblem)(fast))
	defer hs2.Close()
	res, err = http.Get(hs2.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTeapot || string(body) != "short and stout" || res.Header.Get("X-Test") != "kept" {
		t.Errorf("answer within the budget = %d %q %v, want it whole", res.StatusCode, body, res.Header)
	}
}
