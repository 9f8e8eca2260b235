//! jobwheel on MySQL / MariaDB: the store and the row-lease locks in one database.
//!
//! `JOBWHEEL_MYSQL_URL=mysql://root@127.0.0.1:3306/test cargo run --example mysql --features mysql`
//! (the URL defaults to the local development server). Run it in several terminals:
//! each fire still runs once, and `kill -9` of one of them is recovered by the others.

mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("JOBWHEEL_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    common::demo(&url, "example_").await
}
