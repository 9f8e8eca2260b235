//! W3C trace context for runs (feature `otel`): the `traceparent` of the span a fire
//! was triggered in, kept with the fire ([`FireContext::trace`]), and the parent or
//! link it gives a run's span; without the feature every function here is a no-op.
//!
//! The spans themselves are `tracing` spans (`jobwheel.run` and its children on a
//! node, `jobwheel.remote_run` on an executor server); an application that installs
//! `tracing_opentelemetry`'s layer exports them to its OpenTelemetry pipeline.
//!
//! [`FireContext::trace`]: crate::FireContext::trace

use tracing::Span;

/// The W3C `traceparent` of the current span, when it belongs to a sampled or
/// unsampled OpenTelemetry trace (`None` outside one, or without the feature).
pub(crate) fn current() -> Option<String> {
    of(&Span::current())
}

/// The W3C `traceparent` of `span` (see [`current`]).
#[cfg(feature = "otel")]
pub(crate) fn of(span: &Span) -> Option<String> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(not(feature = "otel"))]
pub(crate) fn of(_span: &Span) -> Option<String> {
    None
}

/// Makes `span` a child of the span `traceparent` names (ignored when it does not
/// parse).
#[cfg(feature = "otel")]
pub(crate) fn set_parent(span: &Span, traceparent: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if let Some(cx) = extract(traceparent) {
        let _ = span.set_parent(cx);
    }
}

#[cfg(not(feature = "otel"))]
pub(crate) fn set_parent(_span: &Span, _traceparent: &str) {}

/// Links `span` (the root of a trace of its own) to the span `traceparent` names.
#[cfg(feature = "otel")]
pub(crate) fn link(span: &Span, traceparent: &str) {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if let Some(cx) = extract(traceparent) {
        span.add_link(cx.span().span_context().clone());
    }
}

#[cfg(not(feature = "otel"))]
pub(crate) fn link(_span: &Span, _traceparent: &str) {}

#[cfg(feature = "otel")]
fn extract(traceparent: &str) -> Option<opentelemetry::Context> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    let carrier =
        std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Gives a run's span its place in a trace: the first attempt at a fire triggered
/// inside a span is that span's child; a retry of it starts a trace of its own,
/// linked to that span; any other fire (a schedule's) is a root.
pub(crate) fn place_run(span: &Span, traceparent: Option<&str>, first_attempt: bool) {
    match traceparent {
        Some(t) if first_attempt => set_parent(span, t),
        Some(t) => link(span, t),
        None => {}
    }
}
