package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image     string                    `yaml:"image"`
	Command   []string                  `yaml:"command"`
	Ports     []string                  `yaml:"ports"`
	Volumes   []string                  `yaml:"volumes"`
	Profiles  []string                  `yaml:"profiles"`
	DependsOn map[string]map[string]any `yaml:"depends_on"`
	Restart   string                    `yaml:"restart"`
}

// composeVar matches ${NAME:-default}.
var composeVar = regexp.MustCompile(`\$\{([A-Z0-9_]+):-([^}]*)\}`)

// loadCompose reads ../../docker-compose.yml with every ${VAR:-default}
// replaced by its default, as compose does when VAR is unset.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\$\{[^}]*\}`).FindAll(composeVar.ReplaceAll(b, nil), -1); len(m) > 0 {
		t.Fatalf("docker-compose.yml: variables without a default: %q", m)
	}
	b = composeVar.ReplaceAll(b, []byte("$2"))
	var f composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(false)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	return f
}

// flagValue returns the value following --name in args.
func flagValue(args []string, name string) string {
	if i := slices.Index(args, "--"+name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestComposeFile parses and validates docker-compose.yml: the services the
// container path needs, hir commands that `hir` accepts, two replicas that
// share Redis and a volume, an init step that prepares exactly their data
// directories, and start-up ordering.
func TestComposeFile(t *testing.T) {
	f := loadCompose(t)
	for _, name := range []string{"redis", "init-r1", "init-r2", "hir-r1", "hir-r2", "prometheus"} {
		if _, ok := f.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	redis := f.Services["redis"]
	if !slices.Contains(redis.Command, "redis-server") {
		t.Errorf("redis command = %v, want redis-server", redis.Command)
	}

	// Every hir command names a subcommand and only flags it has.
	usage := map[string]string{}
	for name, s := range f.Services {
		if !strings.HasPrefix(name, "hir-") && !strings.HasPrefix(name, "init-") {
			continue
		}
		if s.Image != f.Services["hir-r1"].Image || s.Image == "" {
			t.Errorf("%s image %q, want the same hir image as hir-r1", name, s.Image)
		}
		if len(s.Command) == 0 {
			t.Errorf("%s has no command", name)
			continue
		}
		sub := s.Command[0]
		if _, ok := usage[sub]; !ok {
			var stderr bytes.Buffer
			if code := run(context.Background(), []string{sub, "-h"}, io.Discard, &stderr); code != 0 {
				t.Errorf("%s: hir %s -h exited %d: %s", name, sub, code, stderr.String())
			}
			usage[sub] = stderr.String()
		}
		for _, a := range s.Command[1:] {
			if strings.HasPrefix(a, "--") && !strings.Contains(usage[sub], "  -"+strings.TrimPrefix(a, "--")+" ") &&
				!strings.Contains(usage[sub], "  -"+strings.TrimPrefix(a, "--")+"\n") {
				t.Errorf("%s: hir %s has no flag %s", name, sub, a)
			}
		}
		for _, v := range s.Volumes {
			if vol, _, _ := strings.Cut(v, ":"); f.Volumes[vol] == nil && !strings.HasPrefix(vol, ".") {
				t.Errorf("%s mounts undeclared volume %q", name, vol)
			}
		}
	}

	// Two replicas in scale-out mode on the shared volume.
	var ids, dirs, ports []string
	for _, name := range []string{"hir-r1", "hir-r2"} {
		s := f.Services[name]
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Fatalf("%s command = %v, want serve", name, s.Command)
		}
		host, port, err := net.SplitHostPort(flagValue(s.Command, "redis"))
		if err != nil || f.Services[host].Command == nil || port != "6379" {
			t.Errorf("%s --redis %q, want the redis service on 6379", name, flagValue(s.Command, "redis"))
		}
		ids = append(ids, flagValue(s.Command, "replica-id"))
		dirs = append(dirs, flagValue(s.Command, "data"))
		ports = append(ports, s.Ports...)
		if flagValue(s.Command, "api-key") == "" {
			t.Errorf("%s has no --api-key: writes would be open", name)
		}
		for _, dep := range []string{"redis", "init-r1", "init-r2"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s does not depend on %s", name, dep)
			}
		}
		for _, dep := range []string{"init-r1", "init-r2"} {
			if c := s.DependsOn[dep]["condition"]; c != "service_completed_successfully" {
				t.Errorf("%s depends on %s with condition %v, want service_completed_successfully", name, dep, c)
			}
		}
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Errorf("replica ids %q, want two distinct ones", ids)
	}
	if dirs[0] == dirs[1] || !strings.HasPrefix(dirs[0], "/data/") || !strings.HasPrefix(dirs[1], "/data/") {
		t.Errorf("replica data directories %q, want two distinct ones on the shared /data volume", dirs)
	}
	if len(ports) != 2 || ports[0] == ports[1] {
		t.Errorf("replica ports %q, want two distinct published ports", ports)
	}

	// The init step prepares exactly the replicas' data directories, identically.
	var prepared []string
	var worlds []string
	for _, name := range []string{"init-r1", "init-r2"} {
		s := f.Services[name]
		if len(s.Command) < 2 || s.Command[0] != "demo" || !slices.Contains(s.Command, "--prepare") {
			t.Errorf("%s command = %v, want demo --prepare", name, s.Command)
			continue
		}
		if s.Restart != "no" {
			t.Errorf("%s restart = %q, want \"no\" (one-shot)", name, s.Restart)
		}
		prepared = append(prepared, flagValue(s.Command, "data"))
		rest := slices.Clone(s.Command)
		i := slices.Index(rest, "--data")
		worlds = append(worlds, strings.Join(slices.Delete(rest, i, i+2), " "))
	}
	if !slices.Equal(prepared, dirs) {
		t.Errorf("init prepares %q, replicas serve %q", prepared, dirs)
	}
	if len(worlds) == 2 && worlds[0] != worlds[1] {
		t.Errorf("init steps differ beyond --data (%q vs %q): the replicas would serve different models", worlds[0], worlds[1])
	}

	// Prometheus is optional and scrapes both replicas.
	if p := f.Services["prometheus"]; !slices.Contains(p.Profiles, "metrics") {
		t.Errorf("prometheus profiles = %v, want it behind the metrics profile", p.Profiles)
	}
	prom, err := os.ReadFile("../../deploy/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(prom, &pc); err != nil || len(pc.ScrapeConfigs) == 0 || len(pc.ScrapeConfigs[0].StaticConfigs) == 0 {
		t.Fatalf("deploy/prometheus.yml: %v %+v", err, pc)
	}
	if got := pc.ScrapeConfigs[0].StaticConfigs[0].Targets; !slices.Equal(got, []string{"hir-r1:8080", "hir-r2:8080"}) {
		t.Errorf("prometheus targets = %v, want both replicas", got)
	}

	// The image the services run: static, non-root, with a health check.
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM scratch AS runtime", "CGO_ENABLED=0", "USER 65532:65532",
		`HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 CMD ["/hir", "healthcheck"]`,
		"ENV GOMLX_BACKEND=go GOMLX_NO_AUTO_INSTALL=1", "ARG GO_IMAGE=golang:1.26-bookworm"} {
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The README's commands build it with Debian's docker.io, whose default is the legacy builder:
	// no BuildKit-only syntax, and only the stages the runtime image needs (the legacy builder builds
	// every stage, so the XLA stages live in Dockerfile.xla).
	for _, bad := range []string{"--mount=", "# syntax=", "runtime-xla", "XLA_BASE"} {
		if bytes.Contains(df, []byte(bad)) {
			t.Errorf("Dockerfile holds %q, which Debian's docker build cannot take or would build needlessly", bad)
		}
	}
	xla, err := os.ReadFile("../../Dockerfile.xla")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AS runtime-xla", "CGO_ENABLED=1", "USER 65532:65532", "GOMLX_BACKEND=xla:"} {
		if !bytes.Contains(xla, []byte(want)) {
			t.Errorf("Dockerfile.xla lacks %q", want)
		}
	}
}

// TestComposeTopology (which also runs the go run demo check, on a copy of
// its prepared directory, to train once) runs the compose topology with real processes on
// loopback: one redis-server on a spare port, the init step (`hir demo
// --prepare`, its directory copied for the second replica, where compose
// runs the same deterministic step twice), two `hir serve --redis`
// replicas; both must answer the same retrieval, and what one ingests the
// other must serve.
func TestComposeTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hir, trains a model and starts Redis and two servers")
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	dir := t.TempDir()
	hir := filepath.Join(dir, "hir")
	build := exec.Command("go", "build", "-o", hir, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	redisAddr := freeAddr(t)
	_, redisPort, _ := net.SplitHostPort(redisAddr)
	redis := exec.CommandContext(ctx, redisBin, "--port", redisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	redis.Dir = dir
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = redis.Process.Kill(); _ = redis.Wait() }()

	r1, r2 := filepath.Join(dir, "r1"), filepath.Join(dir, "r2")
	init := exec.CommandContext(ctx, hir, "demo", "--prepare", "--data", r1, "--users", "80", "--ads", "120", "--steps", "2")
	init.Env = append(os.Environ(), "GOMLX_BACKEND=go", "GOMLX_NO_AUTO_INSTALL=1")
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	r3 := filepath.Join(dir, "r3") // for the demo below
	for _, d := range []string{r2, r3} {
		if out, err := exec.Command("cp", "-a", r1, d).CombinedOutput(); err != nil {
			t.Fatalf("copy the prepared directory: %v\n%s", err, out)
		}
	}

	const key = "topology-key-123"
	bases := make([]string, 2)
	for i, d := range []string{r1, r2} {
		cmd := exec.CommandContext(ctx, hir, "serve", "--data", d, "--addr", "127.0.0.1:0", "--redis", redisAddr,
			"--replica-id", fmt.Sprintf("r%d", i+1), "--api-key", key, "--train-steps", "2")
		cmd.Env = init.Env
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 20 * time.Second
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		addr := make(chan string, 1)
		logs := &syncBuffer{}
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				logs.Write([]byte(line + "\n"))
				if m := regexp.MustCompile(`msg=serving .*addr=([0-9.:]+)`).FindStringSubmatch(line); m != nil {
					addr <- m[1]
				}
			}
		}()
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("replica r%d: %v\n%s", i+1, err, logs.String())
			}
		}()
		select {
		case a := <-addr:
			bases[i] = "http://" + a
		case <-time.After(90 * time.Second):
			t.Fatalf("replica r%d did not listen\n%s", i+1, logs.String())
		}
	}
	for _, b := range bases {
		waitReady(t, b, 90*time.Second)
	}

	q := `{"user":{"type":"user","id":"u1"},"k":10}`
	a, b := postJSON(t, bases[0]+"/v1/retrieve", "", q), postJSON(t, bases[1]+"/v1/retrieve", "", q)
	ids := regexp.MustCompile(`"id":"[^"]*"`)
	if got, want := ids.FindAllString(b, -1), ids.FindAllString(a, -1); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("replica 2 answers %s\nreplica 1 answers %s\nwant the same candidates", b, a)
	}

	postJSON(t, bases[0]+"/v1/entities", key, `{"entities":[{"type":"ad","id":"topo-ad","text":"topology test ad"}]}`)
	postJSON(t, bases[0]+"/v1/events", key, fmt.Sprintf(
		`{"events":[{"id":"topo-cp","src":{"type":"ad","id":"topo-ad"},"dst":{"type":"campaign","id":"cp1"},"type":"in_campaign","ts":%d}]}`,
		time.Now().UnixMilli()))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(postJSON(t, bases[1]+"/v1/retrieve", "",
		`{"user":{"type":"user","id":"u1"},"k":200,"exclude_seen":false,"filter":{"attr":"campaign","eq":"cp1"}}`), `"topo-ad"`) {
		if time.Now().After(deadline) {
			t.Fatal("replica 2 does not serve the ad ingested through replica 1")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("the demo stops on Ctrl-C and SIGTERM", func(t *testing.T) { checkDemoStops(t, hir, r3) })
}

// checkDemoStops starts the built binary's demo on dir (a prepared world
// and model), as the README runs it, waits until it serves, and checks that
// a Ctrl-C (SIGINT to its process group, as a terminal sends it) and a
// SIGTERM to the process each stop the server.
func checkDemoStops(t *testing.T, hir, dir string) {
	for _, tc := range []struct {
		name string
		stop func(p *os.Process) error
	}{
		{"Ctrl-C", func(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGINT) }},
		{"SIGTERM", func(p *os.Process) error { return p.Signal(syscall.SIGTERM) }},
	} {
		cmd := exec.Command(hir, "demo", "--data", dir, "--addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "GOMLX_BACKEND=go", "GOMLX_NO_AUTO_INSTALL=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a shell's foreground job
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		serving := regexp.MustCompile(`HIR demo: serving model \S+ \(\d+ ads\) at (http://\S+)`)
		var base string
		for deadline := time.Now().Add(2 * time.Minute); base == ""; time.Sleep(100 * time.Millisecond) {
			if m := serving.FindStringSubmatch(out.String()); m != nil {
				base = m[1]
			} else if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("%s: the demo did not serve in time:\n%s", tc.name, out)
			}
		}
		waitReady(t, base, 30*time.Second)
		if err := tc.stop(cmd.Process); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s: the demo exited with %v:\n%s", tc.name, err, out)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%s: the demo still runs 30 s after the signal:\n%s", tc.name, out)
		}
		if !strings.Contains(out.String(), "shut down cleanly") {
			t.Errorf("%s: the demo stopped without its shutdown lines:\n%s", tc.name, out)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(t *testing.T, base string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s (%v)", base, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func postJSON(t *testing.T, url, key, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s = %d %s", url, body, res.StatusCode, b)
	}
	return string(b)
}
