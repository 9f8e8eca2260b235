//! Migrations: numbered SQL files per dialect, run by sqlx's `Migrator` into a
//! table of their own per prefix (`<prefix>migrations`), which records each
//! version's checksum; nodes that migrate at once take turns on the database's
//! lock (an advisory lock on PostgreSQL, `GET_LOCK` on MySQL) or on SQLite's write
//! lock with retries. A database migrated by a newer jobwheel (a version this code
//! does not have) is refused with [`Error::SchemaTooNew`]; one whose recorded
//! migration was edited, with an error naming the version.

use super::decode::SqlRow;
use super::{Dialect, Sql};
use crate::error::{Error, Result};
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};
use std::borrow::Cow;
use std::time::Duration;

/// One embedded migration: version, description, SQL in which `{t}` stands for the
/// tables' full name prefix (with the PostgreSQL schema) and `{p}` for the bare
/// prefix (index names).
pub(crate) type Embedded = (i64, &'static str, &'static str);

/// Runs the dialect's migrations not yet applied to its tables. Where the database
/// holds a lock for the run ([`Dialect::MIGRATE_LOCK`]) it runs once; otherwise a
/// node migrating at the same time may win a version, and the run is tried again
/// (up to five times) until the migrator sees every version applied.
pub(crate) async fn run<D: Dialect>(d: &D) -> Result<()> {
    let table = d.t("migrations");
    let full = d.t("");
    let migrations = D::MIGRATIONS
        .iter()
        .map(|(version, description, sql)| {
            let sql = sql.replace("{t}", &full).replace("{p}", d.prefix());
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                AssertSqlSafe(sql).into_sql_str(),
                false,
            )
        })
        .collect();
    let mut m = Migrator::with_migrations(migrations);
    m.dangerous_set_table_name(table.clone());
    let mut tries = 0;
    loop {
        match d.migrate_on_one_connection(&m, &table).await {
            Err(Error::Backend { .. }) if D::MIGRATE_LOCK.is_none() && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20 << tries)).await;
            }
            other => return other,
        }
    }
}

/// Maps the migrator's error: a version recorded in the database but unknown here
/// means a newer jobwheel migrated it.
pub(crate) fn map_err(backend: &'static str, list: &[Embedded], e: MigrateError) -> Error {
    let known = list.iter().map(|m| m.0).max().unwrap_or(0);
    match e {
        MigrateError::VersionMissing(found) => Error::SchemaTooNew {
            backend,
            found,
            known,
        },
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => {
            let temporary = matches!(
                e,
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
            );
            Error::backend(backend, "migrate", temporary, e)
        }
        other => Error::backend(backend, "migrate", false, other),
    }
}

/// Brings a database migrated by the earlier runner (a `<prefix>schema` table of
/// applied versions) under the migrator: records those versions with their
/// checksums in `migrations` (which must exist), then drops the old table. Nothing
/// to do when there is no old table.
pub(crate) async fn adopt_legacy<D: Dialect>(d: &D, m: &Migrator, migrations: &str) -> Result<()> {
    let legacy = d.t("schema");
    let Ok(rows) = d
        .fetch("migrate", Sql::new(format!("SELECT version FROM {legacy}")))
        .await
    else {
        return Ok(());
    };
    let applied: Vec<i64> = rows.iter().filter_map(|r| r.int("version").ok()).collect();
    let known: Vec<i64> = d
        .fetch(
            "migrate",
            Sql::new(format!("SELECT version FROM {migrations}")),
        )
        .await?
        .iter()
        .filter_map(|r| r.int("version").ok())
        .collect();
    for mig in m
        .iter()
        .filter(|x| applied.contains(&x.version) && !known.contains(&x.version))
    {
        let q = Sql::new(format!(
            "INSERT INTO {migrations} (version, description, success, checksum, execution_time) VALUES (?, ?, ?, ?, 0)"
        ))
        .bind(mig.version)
        .bind(mig.description.to_string())
        .bind(true)
        .bind(mig.checksum.to_vec());
        d.exec("migrate", q).await?;
    }
    d.exec("migrate", Sql::new(format!("DROP TABLE {legacy}")))
        .await?;
    Ok(())
}
