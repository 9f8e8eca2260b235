//! What the engine's instruments and traces cost: the same drain (one-shots due now,
//! noop handlers, memory backend, one node) with no `metrics` recorder, with the
//! Prometheus recorder `jobwheel serve` installs, and with the Prometheus recorder
//! and OpenTelemetry spans (`tracing_opentelemetry`'s layer at `INFO` over an SDK
//! tracer provider whose batch processor hands every span to an exporter that drops
//! it), in alternating rounds of one process, medians printed.
//!
//! `cargo bench --bench instruments --features server,otel -- [--oneshots 50000] [--rounds 5]`

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::store::JobsExt as _;
use jobwheel::{Job, JobContext, JobError, Schedule, Scheduler, SchedulerConfig, Timestamp};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusRecorder;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process's recorder: Prometheus while `on`, nothing otherwise (a scheduler
/// registers its instruments when it starts: each round starts one).
struct Switch {
    on: AtomicBool,
    inner: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, k: KeyName, u: Option<Unit>, d: SharedString) {
        self.inner.describe_counter(k, u, d)
    }
    fn describe_gauge(&self, k: KeyName, u: Option<Unit>, d: SharedString) {
        self.inner.describe_gauge(k, u, d)
    }
    fn describe_histogram(&self, k: KeyName, u: Option<Unit>, d: SharedString) {
        self.inner.describe_histogram(k, u, d)
    }
    fn register_counter(&self, key: &Key, m: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_counter(key, m)
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, key: &Key, m: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_gauge(key, m)
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, key: &Key, m: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_histogram(key, m)
        } else {
            Histogram::noop()
        }
    }
}

/// Takes every span and keeps none: what exporting costs the process up to the
/// wire.
#[derive(Debug)]
struct DropSpans;

impl opentelemetry_sdk::trace::SpanExporter for DropSpans {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        EXPORTED.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// Spans the exporter was handed.
static EXPORTED: AtomicU64 = AtomicU64::new(0);

/// Whether the OpenTelemetry layer sees spans.
static OTEL: AtomicBool = AtomicBool::new(false);

/// Installs the process's subscriber: the OpenTelemetry layer, switched by [`OTEL`].
fn install_tracing() -> opentelemetry_sdk::trace::SdkTracerProvider {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(DropSpans)
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("bench"))
        // A dynamic filter: asked at every span, not once per callsite (a static
        // one would cache the answer of the first round).
        .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|m, _| {
            OTEL.load(Ordering::Relaxed) && *m.level() <= tracing::Level::INFO
        }));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(otel))
        .expect("no subscriber yet");
    provider
}

/// Runs/s draining `n` one-shots due now.
async fn drain(n: usize) -> f64 {
    let store = MemoryStore::new();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .handler("noop", |_ctx: JobContext| async { Ok::<(), JobError>(()) })
        .executor(jobwheel::LocalExecutor::with_concurrency(4096).unwrap())
        .config(
            SchedulerConfig::default()
                .node_id("bench")
                .claim_batch(5000)
                .write_batch(2000),
        )
        .build()
        .unwrap();
    let now = Timestamp::now();
    for i in 0..n {
        let job = Job::builder(format!("once-{i}"), "noop", Schedule::once(now))
            .build()
            .unwrap();
        s.store().upsert(&job, Some(now)).await.unwrap();
    }
    let started = Instant::now();
    let h = s.start().await.unwrap();
    while h.scheduler().metrics().finished < n as u64
        && started.elapsed() < Duration::from_secs(300)
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed();
    let finished = h.scheduler().metrics().finished;
    h.shutdown().await;
    finished as f64 / took.as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n = arg("--oneshots", 50_000);
    let rounds = arg("--rounds", 5);
    let inner = jobwheel::admin::prometheus_builder().build_recorder();
    let handle = inner.handle();
    let switch: &'static Switch = Box::leak(Box::new(Switch {
        on: AtomicBool::new(false),
        inner,
    }));
    metrics::set_global_recorder(switch).expect("no recorder yet");
    let provider = install_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "jobwheel instruments bench, memory backend, {} cores, {n} one-shots per round, {rounds} rounds each, alternating",
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    rt.block_on(drain(n / 10)); // warm-up
    let settings = [
        "no recorder",
        "Prometheus recorder",
        "Prometheus + otel spans",
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    for round in 0..rounds * settings.len() {
        let setting = round % settings.len();
        switch.on.store(setting >= 1, Ordering::Relaxed);
        OTEL.store(setting == 2, Ordering::Relaxed);
        let r = rt.block_on(drain(n));
        println!(
            "round {round:>2} | {:<24} | {r:>8.0} runs/s",
            settings[setting]
        );
        results[setting].push(r);
        handle.run_upkeep();
    }
    OTEL.store(false, Ordering::Relaxed);
    let _ = provider.force_flush();
    let medians: Vec<f64> = results.iter().map(|r| median(r.clone())).collect();
    for (i, s) in settings.iter().enumerate() {
        println!(
            "median   | {s:<24} | {:>8.0} runs/s | cost {:>5.1} % | rounds {:?}",
            medians[i],
            (medians[0] - medians[i]) / medians[0] * 100.0,
            results[i]
                .iter()
                .map(|r| r.round() as u64)
                .collect::<Vec<_>>()
        );
    }
    println!(
        "spans    | {} exported (dropped by the exporter) over the otel rounds",
        EXPORTED.load(Ordering::Relaxed)
    );
    println!(
        "scrape   | {} bytes of exposition text",
        handle.render().len()
    );
}
