//! `--store-calls`: the engines' own instruments, read in this process — each store
//! call's duration by operation (`jobwheel_store_call_seconds`), and how late fires
//! were claimed and started (`jobwheel_claim_lag_seconds`,
//! `jobwheel_fire_lag_seconds`) — over every scheduler the workloads ran, printed
//! once they are done. It shows whether a late fire waited for the store (long
//! calls) or for the engine (short calls, late claims).

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// The recorder's handle; [`StoreCalls::print`] reads it.
pub(super) struct StoreCalls(Snapshotter);

impl StoreCalls {
    /// Installs an in-process recorder as the global one (before any scheduler is
    /// built, or their instruments go nowhere).
    pub(super) fn install() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("--store-calls: no other metrics recorder is installed");
        StoreCalls(snapshotter)
    }

    /// Prints one line per histogram of interest: calls, p50, p99 and max in ms.
    pub(super) fn print(&self) {
        let mut lines = Vec::new();
        for (key, _, _, value) in self.0.snapshot().into_vec() {
            let DebugValue::Histogram(mut values) = value else {
                continue;
            };
            let key = key.key();
            let name = key.name();
            let what = match name {
                "jobwheel_store_call_seconds" => key
                    .labels()
                    .find(|l| l.key() == "operation")
                    .map_or_else(|| "store call".to_string(), |l| l.value().to_string()),
                "jobwheel_claim_lag_seconds" => "claim lag (due → claimed)".into(),
                "jobwheel_fire_lag_seconds" => "fire lag (due → started)".into(),
                _ => continue,
            };
            if values.is_empty() {
                continue;
            }
            values.sort_unstable();
            let at = |q: f64| values[((values.len() - 1) as f64 * q) as usize].into_inner() * 1e3;
            lines.push(format!(
                "store-calls | {what:<26} | {:>7} | p50 {:>8.2} ms | p99 {:>8.2} ms | max {:>8.2} ms",
                values.len(),
                at(0.5),
                at(0.99),
                at(1.0)
            ));
        }
        lines.sort();
        for l in lines {
            println!("{l}");
        }
    }
}
