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

/// One embedded migration: version, description, SQL with the dialect's table-name
/// placeholders.
pub(crate) type Embedded = (i64, &'static str, &'static str);

/// sqlx's migrator for `list`, each SQL passed through `names` (which fills in the
/// table names), recording into `table`.
pub(crate) fn migrator(
    list: &[Embedded],
    names: impl Fn(&str) -> String,
    table: String,
) -> Migrator {
    let migrations = list
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                AssertSqlSafe(names(sql)).into_sql_str(),
                false,
            )
        })
        .collect();
    let mut m = Migrator::with_migrations(migrations);
    m.dangerous_set_table_name(table);
    m
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
