//! A three-step pipeline with a fan-in, on the embedded memory backend: `extract`
//! fires every 3 seconds; each of its fires that succeeds releases `orders` and
//! `invoices` (children, which have no schedule of their own); `report` waits for
//! both of them (`after`) and runs once per `extract` fire, after both, naming the
//! runs that released it. Prints the run log at the end.
//!
//! `cargo run --example pipeline` (finishes by itself in about 10 seconds).

use jobwheel::dependency::ChildLink;
use jobwheel::prelude::*;
use std::time::Duration;

/// A step: says which runs released it, takes a moment.
async fn step(ctx: JobContext) -> JobResult {
    let by: Vec<String> = ctx
        .upstream
        .iter()
        .map(|u| format!("{} run {}", u.job, u.run))
        .collect();
    println!(
        "  {:<8} instant {} {}",
        ctx.job.id().as_str(),
        ctx.upstream.first().map_or(ctx.fire_at, |u| u.fire_at),
        if by.is_empty() {
            "(its own schedule)".to_string()
        } else {
            format!("released by {}", by.join(" + "))
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder()
        .backend(connect("memory:").await?)
        .handler("step", step)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(200)))
        .build()?;
    let running = scheduler.start().await?;
    let child = |id: &str| Ok::<_, jobwheel::Error>(ChildLink::on_success(JobId::new(id)?));

    // The join first: it names the parents it waits for, which then list it.
    scheduler
        .upsert(
            Job::builder("report", "step", Schedule::never())
                .after(vec![JobId::new("orders")?, JobId::new("invoices")?])
                .build()?,
        )
        .await?;
    for branch in ["orders", "invoices"] {
        scheduler
            .upsert(
                Job::builder(branch, "step", Schedule::never())
                    .children(vec![child("report")?])
                    .build()?,
            )
            .await?;
    }
    scheduler
        .upsert(
            Job::builder("extract", "step", Schedule::every(Duration::from_secs(3))?)
                .children(vec![child("orders")?, child("invoices")?])
                .build()?,
        )
        .await?;

    tokio::time::sleep(Duration::from_secs(7)).await;
    scheduler.pause("extract").await?;
    // Let the last fire's branches and join finish.
    tokio::time::sleep(Duration::from_secs(3)).await;
    running.shutdown().await;

    let mut runs = scheduler.runs(&RunQuery::new().limit(1000)).await?;
    runs.reverse();
    println!(
        "\n{:<5} {:<9} {:<9} {:<10} released by",
        "run", "job", "trigger", "status"
    );
    for r in &runs {
        let by: Vec<String> = r
            .context
            .upstream
            .iter()
            .map(|u| format!("{} run {}", u.job, u.run))
            .collect();
        println!(
            "{:<5} {:<9} {:<9} {:<10} {}",
            r.id.to_string(),
            r.job_id.as_str(),
            r.trigger.as_str(),
            r.status.as_str(),
            by.join(", ")
        );
    }
    let extracts = runs
        .iter()
        .filter(|r| r.job_id.as_str() == "extract")
        .count();
    let reports = runs
        .iter()
        .filter(|r| r.job_id.as_str() == "report")
        .count();
    println!(
        "\n{extracts} extract fires, {reports} reports: one report per fire, after both branches"
    );
    Ok(())
}
