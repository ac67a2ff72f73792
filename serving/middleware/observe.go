package middleware

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hir-ads/hir/serving/problem"
)

// Observe starts a server span per request (continuing a W3C traceparent),
// records the latency histogram by route, and writes one access-log line.
func Observe(tracer trace.Tracer, duration metric.Float64Histogram, logger *slog.Logger) func(http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method),
					attribute.String("url.path", r.URL.Path),
					attribute.String("hir.request_id", problem.RequestID(r.Context()))))
			defer span.End()
			rec := problem.NewRecorder(w)
			next.ServeHTTP(rec, r.WithContext(ctx))
			status := rec.Status()
			if status == 0 {
				status = http.StatusOK
				if r.Context().Err() != nil {
					status = 499 // the client went away before an answer
				}
			}
			route := r.URL.Path
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			} else {
				route = "unmatched"
			}
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			elapsed := time.Since(start)
			duration.Record(context.WithoutCancel(ctx), elapsed.Seconds(), metric.WithAttributes(
				attribute.String("http.route", route), attribute.String("http.request.method", r.Method),
				attribute.Int("http.response.status_code", status)))
			logger.LogAttrs(ctx, accessLevel(status), "http request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
				slog.Int("status", status), slog.Int64("bytes", rec.Bytes()), slog.Duration("duration", elapsed),
				slog.String("request_id", problem.RequestID(r.Context())), slog.String("remote", r.RemoteAddr))
		})
	}
}

// accessLevel is the access log's level for a response's status.
func accessLevel(status int) slog.Level {
	switch {
	case status == 499:
		return slog.LevelInfo // the client's doing
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
