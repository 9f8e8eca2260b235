//! A cron expression in words, read from the parsed fields (the same grammar that
//! fires it, so every expression that parses has a description): `At 09:30, Monday
//! through Friday`, `Every 5 minutes`, `At 02:00 on the last day of the month`.

use super::{CronExpr, DayRule, DomSpec, DowSpec, MIN_YEAR};

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const ORDINALS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

/// The set bits of `bits` below `n`, in order.
fn ones(bits: u64, n: u32) -> Vec<u32> {
    (0..n).filter(|i| bits & (1 << i) != 0).collect()
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Runs of consecutive values: `[(1, 5), (7, 7)]`.
fn runs(values: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &v in values {
        match out.last_mut() {
            Some((_, end)) if *end + 1 == v => *end = v,
            _ => out.push((v, v)),
        }
    }
    out
}

/// Values named by `name`, runs of three or more as `a through b`.
fn named(values: &[u32], name: impl Fn(u32) -> String) -> String {
    let parts: Vec<String> = runs(values)
        .into_iter()
        .flat_map(|(a, b)| match b - a {
            0 => vec![name(a)],
            1 => vec![name(a), name(b)],
            _ => vec![format!("{} through {}", name(a), name(b))],
        })
        .collect();
    and_list(&parts)
}

/// `Some(step)` when `values` are `start, start + step, …` to the end of `0..n`
/// with `step` dividing `n`, three values at least (a `*/step` field).
fn step(values: &[u32], n: u32) -> Option<u32> {
    let (&first, rest) = values.split_first()?;
    let step = rest.first()? - first;
    let even = values.windows(2).all(|w| w[1] - w[0] == step);
    let whole = values.len() >= 3 && values.len() as u32 == n / step;
    (first < step && even && n.is_multiple_of(step) && whole).then_some(step)
}

fn plural(n: u32, unit: &str) -> String {
    if n == 1 {
        format!("every {unit}")
    } else {
        format!("every {n} {unit}s")
    }
}

impl CronExpr {
    /// The expression in English, in 24-hour time, in the expression's own terms (its
    /// zone is the job's): `At 09:30, Monday through Friday`, `Every 5 minutes`,
    /// `At 00:00 on the last day of the month, in March`.
    pub fn describe(&self) -> String {
        let mut out = self.time_words();
        if let Some(days) = self.day_words() {
            out.push_str(&days);
        }
        let months = ones(u64::from(self.months), 13);
        if months.len() < 12 {
            out.push_str(", in ");
            out.push_str(&named(&months, |m| MONTHS[m as usize - 1].to_string()));
        }
        if let Some(bits) = &self.years {
            let years: Vec<u32> = (0..256)
                .filter(|i| bits[*i as usize / 64] & (1 << (i % 64)) != 0)
                .collect();
            out.push_str(", in ");
            out.push_str(&named(&years, |y| (y as i32 + MIN_YEAR).to_string()));
        }
        out
    }

    fn time_words(&self) -> String {
        let secs = ones(self.seconds, 60);
        let mins = ones(self.minutes, 60);
        let hours = ones(u64::from(self.hours), 24);
        let all_hours = hours.len() == 24;
        let time = |h: u32, m: u32, s: u32| {
            if secs == [0] {
                format!("{h:02}:{m:02}")
            } else {
                format!("{h:02}:{m:02}:{s:02}")
            }
        };
        // A few instants a day: each named.
        if secs.len() == 1 && mins.len() * hours.len() <= 6 {
            let at: Vec<String> = hours
                .iter()
                .flat_map(|&h| mins.iter().map(move |&m| (h, m)))
                .map(|(h, m)| time(h, m, secs[0]))
                .collect();
            return format!("At {}", and_list(&at));
        }
        let hour_words = |out: &mut String| {
            if !all_hours {
                let r = runs(&hours);
                if let [(a, b)] = r[..] {
                    out.push_str(&format!(", between {a:02}:00 and {b:02}:59"));
                } else {
                    out.push_str(&format!(
                        ", in the hours {}",
                        named(&hours, |h| format!("{h:02}"))
                    ));
                }
            }
        };
        let mut out;
        if secs.len() == 60 && mins.len() == 60 {
            out = "Every second".to_string();
        } else if let (Some(k), 60) = (step(&secs, 60), mins.len()) {
            out = capitalised(&plural(k, "second"));
        } else if secs.len() == 1 && mins.len() == 60 {
            out = "Every minute".to_string();
            if secs[0] != 0 {
                out.push_str(&format!(" at second {}", secs[0]));
            }
        } else if let (Some(k), 1) = (step(&mins, 60), secs.len()) {
            out = capitalised(&plural(k, "minute"));
            if mins[0] != 0 {
                out.push_str(&format!(" from minute {}", mins[0]));
            }
        } else if secs.len() == 1 && mins.len() <= 4 {
            let at: Vec<String> = mins
                .iter()
                .map(|m| {
                    if secs[0] == 0 {
                        format!(":{m:02}")
                    } else {
                        format!(":{m:02}:{:02}", secs[0])
                    }
                })
                .collect();
            out = format!("Every hour at {}", and_list(&at));
        } else {
            out = format!(
                "At second {}, minute {}",
                named(&secs, |s| s.to_string()),
                named(&mins, |m| m.to_string())
            );
        }
        hour_words(&mut out);
        out
    }

    fn day_words(&self) -> Option<String> {
        let dom = || dom_words(&self.dom);
        match self.day_rule {
            DayRule::Any => None,
            DayRule::Dom => Some(dom()),
            DayRule::Dow => Some(dow_words(&self.dow, false)),
            DayRule::Either => Some(format!("{} or{}", dom(), dow_words(&self.dow, true))),
        }
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn dom_words(d: &DomSpec) -> String {
    let mut parts = Vec::new();
    let days = ones(u64::from(d.days), 32);
    if !days.is_empty() {
        parts.push(format!("the {}", named(&days, ordinal)));
    }
    for &off in &d.last_minus {
        parts.push(match off {
            0 => "the last day".to_string(),
            1 => "the day before the last".to_string(),
            n => format!("{n} days before the last day"),
        });
    }
    for &n in &d.nearest_weekday {
        parts.push(format!("the weekday nearest the {}", ordinal(u32::from(n))));
    }
    if d.last_weekday {
        parts.push("the last weekday".to_string());
    }
    format!(" on {} of the month", and_list(&parts))
}

/// The days of the week; `on`: always as ` on …` (after an `or`), else a plain set
/// of days as `, Monday through Friday`.
fn dow_words(d: &DowSpec, on: bool) -> String {
    let mut parts = Vec::new();
    let days = ones(u64::from(d.days), 7);
    if !days.is_empty() {
        // Monday first: `Monday through Friday`, `Saturday and Sunday`.
        let monday_first: Vec<u32> = days.iter().map(|&d| (d + 6) % 7).collect::<Vec<_>>();
        let mut sorted = monday_first;
        sorted.sort_unstable();
        parts.push(named(&sorted, |d| {
            WEEKDAYS[((d + 1) % 7) as usize].to_string()
        }));
    }
    for wd in ones(u64::from(d.last_of), 7) {
        parts.push(format!("the last {} of the month", WEEKDAYS[wd as usize]));
    }
    for &(wd, nth) in &d.nth {
        let which = ORDINALS
            .get(usize::from(nth) - 1)
            .copied()
            .unwrap_or("last");
        parts.push(format!(
            "the {which} {} of the month",
            WEEKDAYS[usize::from(wd)]
        ));
    }
    if parts.len() == 1 && !days.is_empty() && !on {
        format!(", {}", parts[0])
    } else {
        format!(" on {}", and_list(&parts))
    }
}

#[cfg(test)]
mod tests {
    use super::super::CronExpr;

    fn says(expr: &str) -> String {
        CronExpr::parse(expr).unwrap().describe()
    }

    #[test]
    fn expressions_read_as_english() {
        for (expr, words) in [
            ("0 30 9 ? * MON-FRI", "At 09:30, Monday through Friday"),
            ("30 9 * * 1-5", "At 09:30, Monday through Friday"),
            ("*/5 * * * *", "Every 5 minutes"),
            ("0 */15 * * * ?", "Every 15 minutes"),
            (
                "0 0/10 9-17 * * ?",
                "Every 10 minutes, between 09:00 and 17:59",
            ),
            ("* * * * *", "Every minute"),
            ("* * * * * ?", "Every second"),
            ("*/10 * * * * ?", "Every 10 seconds"),
            ("0 * * * *", "Every hour at :00"),
            ("0 0 * * *", "At 00:00"),
            ("0 15,45 * * * ?", "Every hour at :15 and :45"),
            ("0 0 9,17 * * ?", "At 09:00 and 17:00"),
            ("0 0 2 L * ?", "At 02:00 on the last day of the month"),
            ("0 0 2 LW * ?", "At 02:00 on the last weekday of the month"),
            (
                "0 0 2 15W * ?",
                "At 02:00 on the weekday nearest the 15th of the month",
            ),
            (
                "0 0 6 1,15 * ?",
                "At 06:00 on the 1st and 15th of the month",
            ),
            (
                "0 0 6 1-7 * ?",
                "At 06:00 on the 1st through 7th of the month",
            ),
            (
                "0 0 12 ? * 6#2",
                "At 12:00 on the second Friday of the month",
            ),
            ("0 0 12 ? * 6L", "At 12:00 on the last Friday of the month"),
            (
                "0 0 0 1 1 ? 2030",
                "At 00:00 on the 1st of the month, in January, in 2030",
            ),
            ("0 0 8 ? * SAT,SUN", "At 08:00, Saturday and Sunday"),
            (
                "0 0 8 * 3,6,9,12 ?",
                "At 08:00, in March, June, September and December",
            ),
            (
                "0 12 1 * 1",
                "At 12:00 on the 1st of the month or on Monday",
            ),
            ("15 30 9 * * ?", "At 09:30:15"),
        ] {
            assert_eq!(says(expr), words, "{expr}");
        }
    }

    #[test]
    fn every_expression_that_parses_has_words() {
        for expr in ["1-7/2 3,5 */7 L-3 JAN-MAR ? 2027-2029", "0 0 0 ? * 2#5,3#1"] {
            let words = says(expr);
            assert!(
                !words.is_empty() && !words.contains("  "),
                "{expr}: {words}"
            );
        }
    }
}
