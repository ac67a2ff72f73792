package serving

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the OpenTelemetry scope of this package.
const instrumentationName = "github.com/hir-ads/hir/serving"

// telemetry holds the server's OpenTelemetry tracer and metric instruments,
// exported to a private Prometheus registry served at GET /metrics.
type telemetry struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	tracer   trace.Tracer
	metrics  http.Handler

	reqDuration metric.Float64Histogram
	candidates  metric.Int64Histogram
	stageTime   metric.Float64Histogram
	ingested    metric.Int64Counter
	trainRuns   metric.Int64Counter
	shed        metric.Int64Counter

	clusterPublished metric.Int64Counter
	clusterApplied   metric.Int64Counter
	clusterReloads   metric.Int64Counter
	callback         metric.Registration
}

// gaugeSource reports the values of the observable gauges at scrape time.
type gaugeSource interface {
	gauges() gaugeValues
}

type gaugeValues struct {
	ready        bool
	modelVersion string
	trainedAtSec float64
	indexSize    int64
	trainerLoss  float64
	hasLoss      bool
	training     bool
	inFlight     int64 // requests holding an admission slot; -1 without admission control
}

func newTelemetry(tp trace.TracerProvider, src gaugeSource) (*telemetry, error) {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("create prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	m := mp.Meter(instrumentationName)
	t := &telemetry{registry: reg, provider: mp, tracer: tp.Tracer(instrumentationName),
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	var errs [8]error
	t.reqDuration, errs[0] = m.Float64Histogram("hir.http.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of HTTP requests by route, method and status."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	t.candidates, errs[1] = m.Int64Histogram("hir.retrieve.candidates", metric.WithUnit("{candidate}"),
		metric.WithDescription("Candidates gathered from the token index per retrieve request, before re-rank."),
		metric.WithExplicitBucketBoundaries(0, 10, 50, 100, 500, 1000, 5000, 10000, 50000))
	t.stageTime, errs[2] = m.Float64Histogram("hir.retrieve.stage.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of one retrieval stage (embed, candidates, rerank)."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1))
	t.ingested, errs[3] = m.Int64Counter("hir.ingest.items", metric.WithUnit("{item}"),
		metric.WithDescription("Entities, events, duplicate events and (replicated) conflicting events ingested, by kind."))
	t.trainRuns, errs[4] = m.Int64Counter("hir.trainer.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Background training runs by outcome (published, rejected, failed)."))
	var indexSize, modelInfo, trainerLoss, ready metric.Float64ObservableGauge
	indexSize, errs[5] = m.Float64ObservableGauge("hir.index.size", metric.WithUnit("{ad}"),
		metric.WithDescription("Ads in the serving index."))
	modelInfo, errs[6] = m.Float64ObservableGauge("hir.model.trained_at", metric.WithUnit("s"),
		metric.WithDescription("Training time (unix seconds) of the serving model; the version is a label."))
	trainerLoss, errs[7] = m.Float64ObservableGauge("hir.trainer.loss",
		metric.WithDescription("Training loss of the last finished training run."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("create instrument: %w", err)
		}
	}
	if t.clusterPublished, err = m.Int64Counter("hir.cluster.published", metric.WithUnit("{batch}"),
		metric.WithDescription("Ingested batches published to the cluster event stream, by outcome (ok, error).")); err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	if t.clusterApplied, err = m.Int64Counter("hir.cluster.applied", metric.WithUnit("{batch}"),
		metric.WithDescription("Batches of other replicas applied from the cluster event stream.")); err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	if t.clusterReloads, err = m.Int64Counter("hir.cluster.model.reloads", metric.WithUnit("{reload}"),
		metric.WithDescription("Models announced by other replicas and hot-swapped, by outcome (loaded, failed).")); err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	ready, err = m.Float64ObservableGauge("hir.ready", metric.WithDescription("1 when a model snapshot is serving."))
	if err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	if t.shed, err = m.Int64Counter("hir.http.shed", metric.WithUnit("{request}"),
		metric.WithDescription("Requests answered 503 overloaded by admission control, never started.")); err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	inFlight, err := m.Int64ObservableGauge("hir.http.inflight", metric.WithUnit("{request}"),
		metric.WithDescription("Requests being handled (holding an admission slot)."))
	if err != nil {
		return nil, fmt.Errorf("create instrument: %w", err)
	}
	t.callback, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		g := src.gauges()
		if g.ready {
			o.ObserveFloat64(ready, 1)
			o.ObserveFloat64(indexSize, float64(g.indexSize))
			o.ObserveFloat64(modelInfo, g.trainedAtSec, metric.WithAttributes(attribute.String("version", g.modelVersion)))
		} else {
			o.ObserveFloat64(ready, 0)
		}
		if g.hasLoss {
			o.ObserveFloat64(trainerLoss, g.trainerLoss)
		}
		if g.inFlight >= 0 {
			o.ObserveInt64(inFlight, g.inFlight)
		}
		return nil
	}, indexSize, modelInfo, trainerLoss, ready, inFlight)
	if err != nil {
		return nil, fmt.Errorf("register gauge callback: %w", err)
	}
	return t, nil
}

func (t *telemetry) close(ctx context.Context) error {
	_ = t.callback.Unregister()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down meter provider: %w", err)
	}
	return nil
}
