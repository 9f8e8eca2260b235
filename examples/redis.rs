//! jobwheel on Redis: the job store and the fenced locks on one Redis server.
//!
//! `JOBWHEEL_REDIS_URL=redis://127.0.0.1:6379/0 cargo run --example redis --features redis`
//! (the URL defaults to the local development server). Run it in several terminals:
//! each fire still runs once, and `kill -9` of one of them is recovered by the others.

mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url =
        std::env::var("JOBWHEEL_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    common::demo(&url, "example:").await
}
