//! Parsing a cron expression ([`CronExpr::parse`]): the forms, the macros, each
//! field's syntax (`*`, `?`, lists, ranges, steps, names, `L`, `W`, `#`) and the
//! errors that name the field and the value.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
    Year,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::Dom => "day-of-month",
            Field::Month => "month",
            Field::Dow => "day-of-week",
            Field::Year => "year",
        }
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

struct Parser<'a> {
    expr: &'a str,
    form: CronForm,
}

impl Parser<'_> {
    fn err(&self, field: Field, reason: impl fmt::Display) -> Error {
        Error::invalid(
            "schedule.cron",
            self.expr,
            format!("{} field: {reason}", field.name()),
        )
    }

    /// Inclusive value range of a field in the expression's own numbering.
    fn bounds(&self, field: Field) -> (u32, u32) {
        match field {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::Dom => (1, 31),
            Field::Month => (1, 12),
            Field::Dow if self.form == CronForm::Quartz => (1, 7),
            Field::Dow => (0, 7),
            Field::Year => (MIN_YEAR as u32, MAX_YEAR as u32),
        }
    }

    /// Parses one value: a number or (month/day-of-week) a name.
    fn value(&self, field: Field, text: &str) -> Result<u32> {
        let (lo, hi) = self.bounds(field);
        let upper = text.to_ascii_uppercase();
        let named = match field {
            Field::Month => MONTHS
                .iter()
                .position(|m| *m == upper)
                .map(|i| i as u32 + 1),
            Field::Dow => DAYS.iter().position(|d| *d == upper).map(|i| {
                if self.form == CronForm::Quartz {
                    i as u32 + 1
                } else {
                    i as u32
                }
            }),
            _ => None,
        };
        let v = match named {
            Some(v) => v,
            None => text
                .parse::<u32>()
                .map_err(|_| self.err(field, format!("{text:?} is not a number or name")))?,
        };
        if v < lo || v > hi {
            return Err(self.err(field, format!("{v} is out of range {lo}-{hi}")));
        }
        Ok(v)
    }

    /// Day of week in the expression's numbering to 0 = Sunday.
    fn dow_index(&self, v: u32) -> u8 {
        match self.form {
            CronForm::Quartz => (v - 1) as u8,
            CronForm::Unix => (v % 7) as u8,
        }
    }

    /// Parses a plain list of `*`, `a`, `a-b`, `a/s`, `a-b/s`, `*/s` items into the
    /// values they select. Returns the values and whether every item was a single
    /// value (no wildcard, range or step).
    fn plain(&self, field: Field, text: &str) -> Result<(Vec<u32>, bool)> {
        let (lo, hi) = self.bounds(field);
        let mut out = Vec::new();
        let mut all_single = true;
        for item in text.split(',') {
            if item.is_empty() {
                return Err(self.err(field, "empty list item"));
            }
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s
                        .parse()
                        .map_err(|_| self.err(field, format!("step {s:?} is not a number")))?;
                    if step == 0 {
                        return Err(self.err(field, "step must be at least 1"));
                    }
                    (r, Some(step))
                }
                None => (item, None),
            };
            let (start, end) = if range == "*" || range == "?" {
                (lo, hi)
            } else if let Some((a, b)) = range.split_once('-') {
                if a.is_empty() || b.is_empty() {
                    return Err(self.err(
                        field,
                        format!("{range:?} is neither a value nor a range a-b (values are never negative)"),
                    ));
                }
                (self.value(field, a)?, self.value(field, b)?)
            } else {
                let a = self.value(field, range)?;
                (a, if step.is_some() { hi } else { a })
            };
            if step.is_some() || start != end || range == "*" || range == "?" {
                all_single = false;
            }
            // A range whose start is after its end wraps around (`FRI-MON`, `22-2`).
            let seq: Vec<u32> = if start <= end {
                (start..=end).collect()
            } else {
                (start..=hi).chain(lo..=end).collect()
            };
            out.extend(seq.into_iter().step_by(step.unwrap_or(1) as usize));
        }
        Ok((out, all_single))
    }

    fn bits64(&self, field: Field, text: &str) -> Result<(u64, bool)> {
        let (values, single) = self.plain(field, text)?;
        Ok((values.iter().fold(0u64, |m, v| m | 1 << v), single))
    }

    fn dom(&self, text: &str) -> Result<DomSpec> {
        let mut spec = DomSpec::default();
        for item in text.split(',') {
            let upper = item.to_ascii_uppercase();
            if upper == "L" {
                spec.last_minus.push(0);
            } else if upper == "LW" {
                spec.last_weekday = true;
            } else if let Some(off) = upper.strip_prefix("L-") {
                let n: u8 = off
                    .parse()
                    .ok()
                    .filter(|n| (1..=30).contains(n))
                    .ok_or_else(|| self.err(Field::Dom, format!("L-{off}: offset must be 1-30")))?;
                spec.last_minus.push(n);
            } else if let Some(day) = upper.strip_suffix('W') {
                let d = self.value(Field::Dom, day)?;
                spec.nearest_weekday.push(d as u8);
            } else {
                let (values, _) = self.plain(Field::Dom, item)?;
                spec.days |= values.iter().fold(0u32, |m, v| m | 1 << v);
            }
        }
        Ok(spec)
    }

    fn dow(&self, text: &str) -> Result<DowSpec> {
        let mut spec = DowSpec::default();
        for item in text.split(',') {
            let upper = item.to_ascii_uppercase();
            if upper == "L" {
                // Quartz: `L` alone in day-of-week is its last day, Saturday.
                spec.days |= 1 << 6;
            } else if let Some((day, n)) = upper.split_once('#') {
                let d = self.dow_index(self.value(Field::Dow, day)?);
                let n: u8 = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=5).contains(n))
                    .ok_or_else(|| self.err(Field::Dow, format!("#{n}: must be #1 to #5")))?;
                spec.nth.push((d, n));
            } else if let Some(day) = upper.strip_suffix('L').filter(|d| !d.is_empty()) {
                let d = self.dow_index(self.value(Field::Dow, day)?);
                spec.last_of |= 1 << d;
            } else {
                let (values, _) = self.plain(Field::Dow, item)?;
                spec.days |= values.iter().fold(0u8, |m, v| m | 1 << self.dow_index(*v));
            }
        }
        Ok(spec)
    }
}

fn is_star(text: &str) -> bool {
    text == "*" || text == "?"
}

impl CronExpr {
    /// Parses a Quartz (6 or 7 fields, seconds first) or Unix (5 fields) expression,
    /// or one of the macros `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
    /// `@midnight`, `@hourly`.
    ///
    /// Errors are [`Error::Invalid`] with field `schedule.cron`, naming the cron field
    /// and the bad value.
    pub fn parse(expr: &str) -> Result<CronExpr> {
        let trimmed = expr.trim();
        let expanded = match trimmed.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            m if m.starts_with('@') => {
                let why = if m == "@reboot" {
                    "@reboot has no instant to fire at; run start-up work in the application"
                } else {
                    "unknown macro"
                };
                return Err(Error::invalid(
                    "schedule.cron",
                    expr,
                    format!(
                        "{why}; the macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly"
                    ),
                ));
            }
            _ => trimmed,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let (form, fields): (CronForm, [&str; 7]) = match parts.len() {
            5 => (
                CronForm::Unix,
                ["0", parts[0], parts[1], parts[2], parts[3], parts[4], "*"],
            ),
            6 | 7 => (
                CronForm::Quartz,
                [
                    parts[0],
                    parts[1],
                    parts[2],
                    parts[3],
                    parts[4],
                    parts[5],
                    parts.get(6).copied().unwrap_or("*"),
                ],
            ),
            n => {
                return Err(Error::invalid(
                    "schedule.cron",
                    expr,
                    format!("expected 5 fields (Unix) or 6-7 fields (Quartz), found {n}"),
                ));
            }
        };
        let p = Parser { expr, form };
        let [sec, min, hour, dom, month, dow, year] = fields;
        for (field, text) in [
            (Field::Second, sec),
            (Field::Minute, min),
            (Field::Hour, hour),
            (Field::Month, month),
            (Field::Year, year),
        ] {
            if text.contains('?') {
                return Err(p.err(field, "`?` is only allowed in day-of-month and day-of-week"));
            }
        }
        let (seconds, _) = p.bits64(Field::Second, sec)?;
        let (minutes, _) = p.bits64(Field::Minute, min)?;
        let (hours, fixed_hour) = p.bits64(Field::Hour, hour)?;
        let (months, _) = p.bits64(Field::Month, month)?;
        let years = if year == "*" {
            None
        } else {
            let (values, _) = p.plain(Field::Year, year)?;
            let mut bits = [0u64; 4];
            for v in values {
                let i = (v as i32 - MIN_YEAR) as usize;
                bits[i / 64] |= 1 << (i % 64);
            }
            Some(Box::new(bits))
        };
        let day_rule = match (is_star(dom), is_star(dow)) {
            (true, true) => {
                if form == CronForm::Quartz && dom == "?" && dow == "?" {
                    return Err(p.err(
                        Field::Dow,
                        "day-of-month and day-of-week cannot both be `?`",
                    ));
                }
                DayRule::Any
            }
            (false, true) => DayRule::Dom,
            (true, false) => DayRule::Dow,
            (false, false) if form == CronForm::Unix => DayRule::Either,
            (false, false) => {
                return Err(p.err(
                    Field::Dow,
                    "day-of-month and day-of-week are both restricted; write `?` in one of them",
                ));
            }
        };
        let dom = if matches!(day_rule, DayRule::Dom | DayRule::Either) {
            p.dom(dom)?
        } else {
            DomSpec::default()
        };
        let dow = if matches!(day_rule, DayRule::Dow | DayRule::Either) {
            p.dow(dow)?
        } else {
            DowSpec::default()
        };
        Ok(CronExpr {
            source: trimmed.to_string(),
            form,
            seconds,
            minutes,
            hours: hours as u32,
            dom,
            months: months as u16,
            dow,
            years,
            day_rule,
            fixed_hour,
        })
    }
}
