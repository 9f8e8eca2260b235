//! A remote executor group in one process: two executor server instances serve the
//! `export` handler on loopback, and a scheduler on the memory backend dispatches an
//! interval job to them round-robin, then prints the run log.
//!
//! `cargo run --example remote --features remote` (finishes by itself in about 5 s).

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{RemoteTarget, Routing};
use jobwheel::prelude::*;
use jobwheel::remote::{ExecutorServer, RemoteGroup};
use std::time::Duration;

/// The handler the executor instances serve.
async fn export(ctx: JobContext) -> JobResult {
    println!(
        "  instance {} runs {} (attempt {})",
        ctx.node_id,
        ctx.job.id(),
        ctx.attempt
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A real group reads its secret from the environment or a secret store.
    let secret = format!("{:032x}", fastrand::u128(..));
    let mut servers = Vec::new();
    for name in ["export-a", "export-b"] {
        let server = ExecutorServer::builder("billing", &secret)?
            .instance(name)
            .handler("export", export)
            .bind("127.0.0.1:0")
            .await?;
        servers.push(server);
    }
    let urls = servers.iter().map(|s| format!("http://{}", s.local_addr()));
    let group = RemoteGroup::fixed("billing", &secret, urls)?;

    let store = MemoryStore::new();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .build()?;
    let running = scheduler.start().await?;
    let target = RemoteTarget::new("billing")?.routing(Routing::RoundRobin);
    let job = Job::builder(
        "export.often",
        "export",
        Schedule::every(Duration::from_secs(1))?,
    )
    .remote(target)
    .build()?;
    scheduler.upsert(job).await?;
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    running.shutdown().await;

    println!("\nrun log:");
    for r in scheduler.runs(&RunQuery::new().limit(20)).await? {
        println!(
            "  {} {} {:?} on node {}",
            r.started_at, r.job_id, r.status, r.node
        );
    }
    for s in servers {
        s.shutdown().await;
    }
    Ok(())
}
