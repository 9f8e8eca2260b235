//! What every SQL backend's `migrate` promises about its record of applied migrations:
//! a database migrated by the earlier runner is adopted, one migrated by a newer
//! jobwheel is refused with a typed error, an edited migration is named.

use jobwheel::Error;
use std::future::Future;

/// Runs the checks on tables already migrated. `exec` runs one statement and returns
/// the rows it affected (or the driver's error as text); `t` is the tables' name
/// prefix (with the schema where there is one); `blob` is a one-byte binary literal in
/// the dialect; `known` is the newest migration this code has.
pub async fn records_are_checked<E, EFut, M, MFut>(
    exec: E,
    migrate: M,
    t: &str,
    blob: &str,
    known: i64,
) where
    E: Fn(String) -> EFut,
    EFut: Future<Output = Result<u64, String>>,
    M: Fn() -> MFut,
    MFut: Future<Output = jobwheel::Result<()>>,
{
    // A database whose versions the earlier runner kept in `<prefix>schema`.
    exec(format!("DROP TABLE {t}migrations")).await.unwrap();
    exec(format!("CREATE TABLE {t}schema (version BIGINT NOT NULL)"))
        .await
        .unwrap();
    let versions: Vec<String> = (1..=known).map(|v| format!("({v})")).collect();
    exec(format!(
        "INSERT INTO {t}schema (version) VALUES {}",
        versions.join(", ")
    ))
    .await
    .unwrap();
    migrate()
        .await
        .expect("an earlier runner's database is adopted");
    assert!(
        exec(format!("DELETE FROM {t}schema")).await.is_err(),
        "the earlier runner's table is dropped"
    );
    let recorded = exec(format!(
        "UPDATE {t}migrations SET execution_time = 0 WHERE success"
    ))
    .await
    .unwrap();
    assert_eq!(recorded, known as u64, "every version is recorded");
    migrate()
        .await
        .expect("and the next run finds nothing to do");

    // A version from a newer jobwheel.
    exec(format!(
        "INSERT INTO {t}migrations (version, description, success, checksum, execution_time)
         VALUES (99, 'from a newer jobwheel', TRUE, {blob}, 0)"
    ))
    .await
    .unwrap();
    match migrate().await {
        Err(Error::SchemaTooNew {
            found, known: k, ..
        }) => {
            assert_eq!((found, k), (99, known));
        }
        other => panic!("a newer schema is refused with SchemaTooNew, got {other:?}"),
    }
    exec(format!("DELETE FROM {t}migrations WHERE version = 99"))
        .await
        .unwrap();

    // A migration whose text changed since it ran.
    exec(format!(
        "UPDATE {t}migrations SET checksum = {blob} WHERE version = 1"
    ))
    .await
    .unwrap();
    let err = migrate().await.expect_err("an edited migration is refused");
    assert!(
        err.to_string().contains("migration 1 ") && err.to_string().contains("modified"),
        "the error names the version: {err}"
    );
}
