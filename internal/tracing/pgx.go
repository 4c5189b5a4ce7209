package tracing

import (
	"context"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// maxQueryText bounds the SQL a span carries. Queries are berth's own
// text with $n placeholders: values, secrets among them, are never in it.
const maxQueryText = 1024

// QueryTracer makes a client span of each query and batch made within a
// trace (store.OpenTraced); queries of background loops outside any
// trace make none.
func (t *Tracing) QueryTracer() interface {
	pgx.QueryTracer
	pgx.BatchTracer
} {
	return queryTracer{t}
}

type queryTracer struct{ t *Tracing }

func (q queryTracer) begin(ctx context.Context, name, sql string) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if len(sql) > maxQueryText {
		sql = sql[:maxQueryText]
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", "postgresql")}
	if sql != "" {
		attrs = append(attrs, attribute.String("db.query.text", sql))
	}
	ctx, _ = q.t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, spanKey{}, true)
}

// spanKey marks a context whose span this tracer started, so its end
// does not end the caller's span.
type spanKey struct{}

func (q queryTracer) finish(ctx context.Context, err error) {
	if ours, _ := ctx.Value(spanKey{}).(bool); ours {
		end(trace.SpanFromContext(ctx), err)
	}
}

func (q queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return q.begin(ctx, "db query", data.SQL)
}

func (q queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	q.finish(ctx, data.Err)
}

func (q queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return q.begin(ctx, "db batch", "")
}

func (q queryTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (q queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	q.finish(ctx, data.Err)
}
