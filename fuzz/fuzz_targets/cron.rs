//! The cron parser and `next_after`: any text either is refused with a typed error
//! or parses into an expression whose next fires never panic and always lie after
//! their input.
#![no_main]

use jobwheel::Timestamp;
use jobwheel::schedule::CronSchedule;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (instant, text) = data.split_at(8);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let (expr, zone) = text.split_once('|').unwrap_or((text, "UTC"));
    match CronSchedule::new(expr, zone) {
        Err(e) => assert!(e.field().is_some(), "untyped error: {e:?}"),
        Ok(c) => {
            let t = Timestamp::from_millis(i64::from_le_bytes(instant.try_into().unwrap()));
            if let Some(next) = c.next_after(t) {
                assert!(next > t, "{expr} after {t}: {next}");
            }
        }
    }
});
