//! jobwheel on PostgreSQL: the store and the row-lease locks in one database.
//!
//! `JOBWHEEL_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example postgres --features postgres`
//! (the URL defaults to the local development server). Run it in several terminals:
//! each fire still runs once, and `kill -9` of one of them is recovered by the others.

mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("JOBWHEEL_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    common::demo(&url, "example_").await
}
