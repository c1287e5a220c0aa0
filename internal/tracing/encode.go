package tracing

import (
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP protobuf encoding of the SDK's spans: an
// ExportTraceServiceRequest (opentelemetry/proto/collector/trace/v1) of
// the messages of opentelemetry/proto/trace/v1, common/v1 and
// resource/v1, written field by field with protowire, so that no
// generated message package nor the protobuf runtime is linked. What it
// writes is what the SDK's exporters write (their tracetransform, whose
// tests this package's compare against): the same fields, present under
// the same conditions.

// Field numbers of the OTLP messages written here.
const (
	requestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	resourceSpansResource   = 1
	resourceSpansScopeSpans = 2
	resourceSpansSchemaURL  = 3

	scopeSpansScope     = 1
	scopeSpansSpans     = 2
	scopeSpansSchemaURL = 3

	spanTraceID           = 1
	spanSpanID            = 2
	spanTraceState        = 3
	spanParentSpanID      = 4
	spanName              = 5
	spanKind              = 6
	spanStartTime         = 7
	spanEndTime           = 8
	spanAttributes        = 9
	spanDroppedAttributes = 10
	spanEvents            = 11
	spanDroppedEvents     = 12
	spanLinks             = 13
	spanDroppedLinks      = 14
	spanStatus            = 15
	spanFlags             = 16

	statusMessage = 2
	statusCode    = 3

	eventTime              = 1
	eventName              = 2
	eventAttributes        = 3
	eventDroppedAttributes = 4

	linkTraceID           = 1
	linkSpanID            = 2
	linkAttributes        = 4
	linkDroppedAttributes = 5
	linkFlags             = 6

	resourceAttributes = 1

	scopeName       = 1
	scopeVersion    = 2
	scopeAttributes = 3

	keyValueKey   = 1
	keyValueValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	arrayValues  = 1 // ArrayValue.values and KeyValueList.values
	kvListValues = 1
)

// Values of the OTLP enums and flags written here.
const (
	statusUnset = 0
	statusOK    = 1
	statusError = 2

	// SpanFlags: the W3C trace flags in the low byte, then whether the
	// parent's remoteness is known and whether it is remote.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// exportRequest encodes spans as an ExportTraceServiceRequest: one
// ResourceSpans per resource, one ScopeSpans per instrumentation scope of
// it, in the order they first come. It returns nil for no span.
func exportRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourced struct {
		res    *resource.Resource
		scopes []*scoped
	}
	var order []*resourced
	byResource := map[attribute.Distinct]*resourced{}
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		key := sd.Resource().Equivalent()
		r := byResource[key]
		if r == nil {
			r = &resourced{res: sd.Resource()}
			byResource[key] = r
			order = append(order, r)
		}
		i := slices.IndexFunc(r.scopes, func(s *scoped) bool { return s.scope == sd.InstrumentationScope() })
		if i < 0 {
			i = len(r.scopes)
			r.scopes = append(r.scopes, &scoped{scope: sd.InstrumentationScope()})
		}
		r.scopes[i].spans = append(r.scopes[i].spans, sd)
	}
	var b []byte
	for _, r := range order {
		b = appendMessage(b, requestResourceSpans, func(b []byte) []byte {
			if r.res != nil {
				b = appendMessage(b, resourceSpansResource, func(b []byte) []byte {
					return appendAttributes(b, resourceAttributes, r.res.Attributes())
				})
			}
			for _, s := range r.scopes {
				b = appendMessage(b, resourceSpansScopeSpans, func(b []byte) []byte { return appendScopeSpans(b, s.scope, s.spans) })
			}
			return appendString(b, resourceSpansSchemaURL, r.res.SchemaURL())
		})
	}
	return b
}

func appendScopeSpans(b []byte, scope instrumentation.Scope, spans []sdktrace.ReadOnlySpan) []byte {
	if scope != (instrumentation.Scope{}) {
		b = appendMessage(b, scopeSpansScope, func(b []byte) []byte {
			b = appendString(b, scopeName, scope.Name)
			b = appendString(b, scopeVersion, scope.Version)
			return appendAttributes(b, scopeAttributes, scope.Attributes.ToSlice())
		})
	}
	for _, sd := range spans {
		b = appendMessage(b, scopeSpansSpans, func(b []byte) []byte { return appendSpan(b, sd) })
	}
	return appendString(b, scopeSpansSchemaURL, scope.SchemaURL)
}

func appendSpan(b []byte, sd sdktrace.ReadOnlySpan) []byte {
	sc, parent := sd.SpanContext(), sd.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, sd.Name())
	b = appendVarint(b, spanKind, uint64(kind(sd.SpanKind())))
	b = appendFixed64(b, spanStartTime, unixNano(sd.StartTime().UnixNano()))
	b = appendFixed64(b, spanEndTime, unixNano(sd.EndTime().UnixNano()))
	b = appendAttributes(b, spanAttributes, sd.Attributes())
	b = appendVarint(b, spanDroppedAttributes, clampUint32(sd.DroppedAttributes()))
	for _, e := range sd.Events() {
		b = appendMessage(b, spanEvents, func(b []byte) []byte {
			b = appendFixed64(b, eventTime, unixNano(e.Time.UnixNano()))
			b = appendString(b, eventName, e.Name)
			b = appendAttributes(b, eventAttributes, e.Attributes)
			return appendVarint(b, eventDroppedAttributes, clampUint32(e.DroppedAttributeCount))
		})
	}
	b = appendVarint(b, spanDroppedEvents, clampUint32(sd.DroppedEvents()))
	for _, l := range sd.Links() {
		b = appendMessage(b, spanLinks, func(b []byte) []byte {
			tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, linkTraceID, tid[:])
			b = appendBytes(b, linkSpanID, sid[:])
			b = appendAttributes(b, linkAttributes, l.Attributes)
			b = appendVarint(b, linkDroppedAttributes, clampUint32(l.DroppedAttributeCount))
			return appendFixed32(b, linkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, spanDroppedLinks, clampUint32(sd.DroppedLinks()))
	st := sd.Status()
	b = appendMessage(b, spanStatus, func(b []byte) []byte {
		b = appendString(b, statusMessage, st.Description)
		return appendVarint(b, statusCode, status(st.Code))
	})
	return appendFixed32(b, spanFlags, flags(sc.TraceFlags(), parent))
}

func kind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0 // SPAN_KIND_UNSPECIFIED
	}
	return int(k) // the OTLP enum numbers the kinds as the API does
}

func status(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusOK
	case codes.Error:
		return statusError
	}
	return statusUnset
}

// flags are the W3C trace flags and whether the parent (or a link's span)
// is remote.
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func clampUint32(v int) uint64 {
	return uint64(min(max(v, 0), math.MaxUint32))
}

func appendAttributes(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, keyValueKey, string(kv.Key))
			return appendMessage(b, keyValueValue, func(b []byte) []byte { return appendValue(b, kv.Value) })
		})
	}
	return b
}

// appendValue appends the fields of an AnyValue: its one value, written
// even when it is a zero (a oneof member is present when set).
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, anyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, anyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, anyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, anyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		return appendMessage(b, anyKVList, func(b []byte) []byte { return appendAttributes(b, kvListValues, v.AsMap()) })
	case attribute.EMPTY:
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), "INVALID")
}

func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	return appendMessage(b, anyArray, func(b []byte) []byte {
		for _, v := range vs {
			b = appendMessage(b, arrayValues, func(b []byte) []byte { return appendValue(b, value(v)) })
		}
		return b
	})
}

// appendMessage appends field num, an embedded message whose fields fn
// appends (present even when it has none).
func appendMessage(b []byte, num protowire.Number, fn func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = fn(b)
	return slices.Insert(b, start, protowire.AppendVarint(nil, uint64(len(b)-start))...)
}

// The scalar fields of proto3: a zero value is not written.

func appendString(b []byte, num protowire.Number, s string) []byte {
	return appendScalar(b, num, protowire.BytesType, s, protowire.AppendString)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return appendScalar(b, num, protowire.BytesType, string(v), protowire.AppendString)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	return appendScalar(b, num, protowire.VarintType, v, protowire.AppendVarint)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	return appendScalar(b, num, protowire.Fixed64Type, v, protowire.AppendFixed64)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	return appendScalar(b, num, protowire.Fixed32Type, v, protowire.AppendFixed32)
}

// appendScalar appends field num of wire type typ, v written by put,
// unless v is its type's zero.
func appendScalar[T comparable](b []byte, num protowire.Number, typ protowire.Type, v T, put func([]byte, T) []byte) []byte {
	var zero T
	if v == zero {
		return b
	}
	return put(protowire.AppendTag(b, num, typ), v)
}
