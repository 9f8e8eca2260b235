//! Generated input for every documented operation: odd ids, query strings and
//! bodies, from a seed printed at the start (`JOBWHEEL_API_SEED` replays one). The
//! server answers each with JSON and a status its operation documents (checked
//! with the rest of the suite's statuses by `check_document`), never 500, and every
//! refusal names its error.

use super::{Ctx, JOB};
use serde_json::{Value, json};

/// Requests per operation.
const CASES: usize = 24;

/// Values that have broken parsers before: empty, signs, overflow, separators,
/// escapes, control and non-ASCII text, markup.
const ODD: &[&str] = &[
    "",
    "0",
    "-1",
    "18446744073709551616",
    "1e309",
    "NaN",
    "true",
    "null",
    "[]",
    "{}",
    "a,b",
    "%00",
    "..%2F..%2F",
    "%E2%80%AE",
    "%F0%9F%98%80",
    "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "2026-13-45T25:61:61Z",
    "2026-12-04T00:00:00Z",
    "2026-12-04",
    "0%200%200%20*%20*%20%3F",
    "Asia%2FShanghai",
    "Mars%2FOlympus",
    "running",
    "manual",
];

/// Strings for JSON bodies: control and bidi characters, markup, non-ASCII, and
/// values that are almost right for some field.
const STRINGS: &[&str] = &[
    "",
    "\u{0}",
    "\u{202e}evil",
    "<script>alert(1)</script>",
    "日本語",
    "0 0 9 * * ?",
    "0 61 9 * * ?",
    "@reboot",
    "Asia/Shanghai",
    "Mars/Olympus",
    "5m",
    "-1s",
    "2026-12-04T00:00:00Z",
    "billing",
];

/// The query parameters any operation may be sent, documented or not.
const PARAMS: &[&str] = &[
    "limit", "after", "before", "q", "handler", "group", "enabled", "next", "expr", "zone", "job",
    "status", "node", "trigger", "since", "until", "offset", "from", "to", "actor", "target",
    "colour",
];

struct Gen(fastrand::Rng);

impl Gen {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.0.usize(..from.len())]
    }

    /// A path segment for `{id}`.
    fn id(&mut self) -> String {
        match self.0.u8(..6) {
            0 => JOB.to_string(),
            1 => self.0.i64(..).to_string(),
            2 => "x".repeat(self.0.usize(190..400)),
            3 => self.0.u32(..50).to_string(),
            _ => self.pick(ODD).to_string(),
        }
        .replace('/', "%2F")
    }

    fn query(&mut self) -> String {
        let n = self.0.usize(..4);
        let pairs: Vec<String> = (0..n)
            .map(|_| format!("{}={}", self.pick(PARAMS), self.pick(ODD)))
            .collect();
        if pairs.is_empty() {
            String::new()
        } else {
            format!("?{}", pairs.join("&"))
        }
    }

    /// Any JSON value, `depth` levels at most.
    fn value(&mut self, depth: u32) -> Value {
        match self.0.u8(..if depth == 0 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => json!(self.0.bool()),
            2 => json!(self.0.i64(..)),
            3 => json!(self.0.f64() * 1e300),
            4 => json!(self.pick(STRINGS)),
            5 | 6 => {
                let keys = [
                    "id", "handler", "schedule", "payload", "kind", "expr", "zone", "at", "every",
                    "remote", "group", "name", "password", "retry", "timeout",
                ];
                let n = self.0.usize(..5);
                let mut m = serde_json::Map::new();
                for _ in 0..n {
                    m.insert(self.pick(&keys).to_string(), self.value(depth - 1));
                }
                Value::Object(m)
            }
            _ => Value::Array(
                (0..self.0.usize(..4))
                    .map(|_| self.value(depth - 1))
                    .collect(),
            ),
        }
    }

    /// A job definition with one field made odd, or none.
    fn job(&mut self) -> Value {
        let mut job = json!({
            "id": format!("gen.{}", self.0.u32(..)),
            "handler": "echo",
            "schedule": {"kind": "cron", "expr": "0 0 9 * * ?", "zone": "UTC"},
            "remote": {"group": "billing"},
        });
        let path = self.pick(&[
            "id", "handler", "schedule", "payload", "remote", "timeout", "retry",
        ]);
        if self.0.bool() {
            job[path] = self.value(2);
        }
        job
    }

    fn body(&mut self) -> Vec<u8> {
        match self.0.u8(..5) {
            0 => b"{\"unclosed\": [1, 2".to_vec(),
            1 => vec![0xff, 0xfe, b'{', b'}'],
            2 => self.job().to_string().into_bytes(),
            3 => json!({"payload": self.value(3)}).to_string().into_bytes(),
            _ => self.value(3).to_string().into_bytes(),
        }
    }
}

/// Sends [`CASES`] generated requests to every documented operation as the admin.
pub async fn every_operation_takes_generated_input(c: &Ctx, doc: &Value) {
    let seed = std::env::var("JOBWHEEL_API_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("generated API input: JOBWHEEL_API_SEED={seed}");
    let mut g = Gen(fastrand::Rng::with_seed(seed));
    let mut tally = std::collections::BTreeMap::<u16, usize>::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            if (method.as_str(), path.as_str()) == ("DELETE", "/api/v1/session") {
                continue; // logging the admin token out changes nothing; nothing to vary
            }
            for _ in 0..CASES {
                let real = format!("{}{}", path.replace("{id}", &g.id()), g.query());
                let body = matches!(method.as_str(), "POST" | "PUT").then(|| g.body());
                let a = c
                    .api
                    .call(&c.admin, &method, path, &real, body.clone())
                    .await;
                *tally.entry(a.status).or_default() += 1;
                let sent = body.map(|b| String::from_utf8_lossy(&b).into_owned());
                assert!(
                    a.status < 500,
                    "{method} {real} {sent:?} (seed {seed}): {} {}",
                    a.status,
                    a.body
                );
                if a.status >= 400 {
                    assert!(
                        a.body["error"].is_string() && a.body["message"].is_string(),
                        "{method} {real} {sent:?} (seed {seed}): a refusal names its error: {}",
                        a.body
                    );
                }
            }
        }
    }
    println!("generated API input: answers by status {tally:?}");
    let accepted: usize = tally.range(200..300).map(|(_, n)| n).sum();
    let refused = tally.get(&400).copied().unwrap_or(0);
    assert!(
        accepted > 50 && refused > 50,
        "the input reaches both the handlers and their checks: {tally:?}"
    );
}
