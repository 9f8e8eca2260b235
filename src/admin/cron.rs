//! Cron previews: the next fires of an expression in a zone, and its description in
//! words ([`CronExpr::describe`](crate::CronExpr::describe), read from the same
//! parse that fires it); the console's job form, the admin API and `jobwheel cron`
//! show the same.

use super::views::{Fire, MAX_FIRES, next_fires};
use crate::error::{Error, Result};
use crate::schedule::{CronForm, CronSchedule, Schedule};
use crate::time::Timestamp;
use serde::Serialize;

/// What a preview shows.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CronPreview {
    /// The expression as given.
    pub expr: String,
    /// `quartz` or `unix`.
    pub form: &'static str,
    /// The IANA zone it fires in.
    pub zone: String,
    /// The expression in words, in 24-hour time in its zone (`At 09:30, Monday
    /// through Friday`).
    pub description: String,
    /// The fires are after this instant.
    pub after: Timestamp,
    /// The next fires (fewer when the expression stops firing).
    pub fires: Vec<Fire>,
}

/// The next `n` fires of `expr` in `zone` after `after`, and its description.
///
/// Errors: [`Error::Invalid`] naming `schedule.cron` or `schedule.zone` (as the job
/// form would), or `next` outside 1-1000.
pub fn preview(expr: &str, zone: &str, after: Timestamp, n: usize) -> Result<CronPreview> {
    let schedule = CronSchedule::new(expr, zone)?;
    if !(1..=MAX_FIRES).contains(&n) {
        return Err(Error::invalid("next", n, "must be 1-1000"));
    }
    let form = schedule.expr().form();
    let description = schedule.expr().describe();
    let zone = schedule.zone().name().to_string();
    let fires = next_fires(&Schedule::Cron(schedule), after, n);
    Ok(CronPreview {
        expr: expr.to_string(),
        form: match form {
            CronForm::Quartz => "quartz",
            CronForm::Unix => "unix",
        },
        zone,
        description,
        after,
        fires,
    })
}
