//! `jobwheel cron`: the next fires of an expression in a zone, computed by the same
//! code the engine fires with (DST rules included), and a description in words
//! from `CronExpr::describe` — the preview the admin API and the console show.

use super::{Failure, Outcome, print_json, table};
use crate::admin::cron::preview;
use crate::time::Timestamp;
use chrono::DateTime;
use clap::Args;

#[derive(Args, Debug)]
pub(crate) struct CronArgs {
    /// The expression: Quartz (`sec min hour dom month dow [year]`) or Unix
    /// (`min hour dom month dow`).
    expr: String,
    /// The IANA time zone it fires in.
    #[arg(long, default_value = "UTC")]
    zone: String,
    /// How many fires to list (1-1000).
    #[arg(long, default_value_t = 5)]
    next: usize,
    /// List the fires after this instant (RFC 3339; default: now).
    #[arg(long)]
    after: Option<String>,
}

pub(crate) fn run(args: &CronArgs, json: bool) -> Outcome {
    let after = match &args.after {
        None => Timestamp::now(),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| Timestamp::from_datetime(&t))
            .map_err(|e| Failure::Usage(format!("invalid --after {text:?}: {e}")))?,
    };
    let preview = preview(&args.expr, &args.zone, after, args.next).map_err(|e| match e {
        crate::error::Error::Invalid {
            field: "next",
            value,
            reason,
        } => Failure::Usage(format!("invalid --next {value}: {reason}")),
        other => other.into(),
    })?;
    if json {
        return print_json(&preview);
    }
    println!(
        "{} ({} form, {})",
        table::escape(&preview.description),
        preview.form,
        preview.zone
    );
    let rows: Vec<Vec<String>> = preview
        .fires
        .iter()
        .map(|f| vec![f.local.clone(), f.at.to_string()])
        .collect();
    table::print(&["local", "utc"], &rows);
    if preview.fires.len() < args.next {
        println!(
            "no more fires before the end of {}",
            crate::schedule::MAX_YEAR
        );
    }
    Ok(())
}
