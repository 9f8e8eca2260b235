//! `jobwheel cron`: the next fires of an expression in a zone, computed by the same
//! code the engine fires with (DST rules included), and a description in words
//! from `cron-descriptor`.

use super::{Failure, Outcome, print_json, table};
use chrono::{DateTime, SecondsFormat};
use clap::Args;
use jobwheel::Timestamp;
use jobwheel::schedule::{CronForm, CronSchedule};
use serde::Serialize;

/// Most fires `--next` may ask for.
const MAX_NEXT: usize = 1_000;

#[derive(Args, Debug)]
pub struct CronArgs {
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

/// What `--json` prints.
#[derive(Serialize)]
struct Preview {
    expr: String,
    form: &'static str,
    zone: String,
    /// `None` when the describer does not know the expression's syntax (some
    /// Quartz forms with a year field); the fires are still right.
    description: Option<String>,
    after: Timestamp,
    fires: Vec<Fire>,
}

#[derive(Serialize)]
struct Fire {
    /// The instant.
    at: Timestamp,
    /// The same instant on the zone's wall clock, with its UTC offset.
    local: String,
}

pub fn run(args: &CronArgs, json: bool) -> Outcome {
    let schedule = CronSchedule::new(&args.expr, &args.zone)?;
    if !(1..=MAX_NEXT).contains(&args.next) {
        return Err(Failure::Usage(format!(
            "invalid --next {}: must be 1-{MAX_NEXT}",
            args.next
        )));
    }
    let after = match &args.after {
        None => Timestamp::now(),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| Timestamp::from_datetime(&t))
            .map_err(|e| Failure::Usage(format!("invalid --after {text:?}: {e}")))?,
    };
    let zone = schedule.zone();
    let mut fires = Vec::with_capacity(args.next);
    let mut t = after;
    while fires.len() < args.next {
        let Some(at) = schedule.next_after(t) else {
            break;
        };
        fires.push(Fire {
            at,
            local: at
                .to_datetime()
                .with_timezone(&zone)
                .to_rfc3339_opts(SecondsFormat::Secs, true),
        });
        t = at;
    }
    let form = schedule.expr().form();
    let preview = Preview {
        expr: args.expr.clone(),
        form: match form {
            CronForm::Quartz => "quartz",
            CronForm::Unix => "unix",
        },
        zone: zone.name().to_string(),
        description: describe(&args.expr, form),
        after,
        fires,
    };
    if json {
        return print_json(&preview);
    }
    println!(
        "{} ({} form, {})",
        table::escape(preview.description.as_deref().unwrap_or("(no description)")),
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
            jobwheel::schedule::MAX_YEAR
        );
    }
    Ok(())
}

/// The expression in words, or `None` when the describer cannot read it. Quartz
/// numbers the days of the week 1-7 from Sunday; Unix 0-7 with 0 and 7 Sunday.
fn describe(expr: &str, form: CronForm) -> Option<String> {
    use cron_descriptor::cronparser::{Options, cron_expression_descriptor};
    let options = Options {
        zero_based_day_of_week: form == CronForm::Unix,
        ..Options::twenty_four_hour()
    };
    cron_expression_descriptor::get_description_cron_options(expr, &options).ok()
}
