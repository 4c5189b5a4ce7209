// Package tracing owns berth's OpenTelemetry traces: the provider, set
// up from the standard OTEL_* environment (an OTLP/HTTP exporter when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set, nothing otherwise), and the observers that make spans of HTTP
// requests (joining a caller's W3C trace context), tool calls,
// operations, commands, runtime calls, database queries and calls to
// sandbox agents (which get the trace context in their headers).
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/version"
)

const scope = "github.com/berth-mcp/berth"

// Tracing makes berth's spans with one provider.
type Tracing struct {
	enabled  bool
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// FromEnv sets tracing up from the environment: with no OTLP endpoint
// set it is off (Enabled false) and costs nothing.
func FromEnv(ctx context.Context) (*Tracing, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return &Tracing{tracer: noop.NewTracerProvider().Tracer(scope), prop: propagation.TraceContext{},
			shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override berth's own name.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "berth"),
		attribute.String("service.version", version.Version)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// New makes spans with tp (tests pass one with an in-process recorder).
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{enabled: true, tracer: tp.Tracer(scope), prop: propagation.TraceContext{},
		shutdown: func(context.Context) error { return nil }}
}

// Enabled says whether spans are recorded and exported; when not, the
// observers need not be installed at all.
func (t *Tracing) Enabled() bool { return t.enabled }

// Shutdown sends the spans still buffered.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// HTTP makes a server span of each request, the child of the caller's
// span when the request carries a W3C traceparent, named by method and
// route pattern once routed.
func (t *Tracing) HTTP() observe.HTTPObserver {
	return func(r *http.Request) (*http.Request, func(*observe.Request)) {
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		return r.WithContext(ctx), func(info *observe.Request) {
			if info.Route != "" {
				span.SetName(r.Method + " " + info.Route)
				span.SetAttributes(attribute.String("http.route", info.Route))
			}
			span.SetAttributes(attribute.Int("http.response.status_code", info.Status),
				attribute.String("berth.request_id", info.RequestID))
			if tool := info.Tool(); tool != "" {
				span.SetAttributes(attribute.String("berth.mcp.tool", tool))
			}
			if info.Status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(info.Status))
			}
			span.End()
		}
	}
}

// Hook makes a span of each unit of work, named kind and name ("tool
// bash", "operation start_server"). With rooted false it makes none
// outside a trace, so background loops (the watcher's runtime and agent
// calls) do not each start a trace of their own.
func (t *Tracing) Hook(kind string, rooted bool) observe.Hook {
	return func(name string) observe.Start {
		return t.start(kind+" "+name, rooted, attribute.String("berth."+kind, name))
	}
}

func (t *Tracing) start(spanName string, rooted bool, attrs ...attribute.KeyValue) observe.Start {
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	return func(ctx context.Context) (context.Context, observe.Done) {
		if !rooted && !trace.SpanContextFromContext(ctx).IsValid() {
			return ctx, func(error) {}
		}
		ctx, span := t.tracer.Start(ctx, spanName, opts...)
		return ctx, func(err error) { end(span, err) }
	}
}

func end(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Hooks trace the orchestrator's operations (each the root of its own
// trace: the worker runs it apart from the request that asked), its
// commands and its calls to agents, into whose headers the trace
// context goes.
func (t *Tracing) Hooks() observe.Hooks {
	return observe.Hooks{
		Operation: t.Hook("operation", true),
		Exec:      t.Hook("exec", false),
		Agent:     t.start("agent call", false),
		Inject: func(ctx context.Context, h http.Header) {
			t.prop.Inject(ctx, propagation.HeaderCarrier(h))
		},
	}
}

// Tool traces MCP tool calls (within their request's trace).
func (t *Tracing) Tool() observe.Hook { return t.Hook("tool", true) }

// Runtime traces runtime calls made within a trace.
func (t *Tracing) Runtime() observe.Hook { return t.Hook("runtime", false) }
