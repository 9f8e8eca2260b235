//! The configuration loader: any TOML or JSON text is refused by serde or by
//! `validate()` with the field named, or is a configuration a scheduler builds with.
#![no_main]

use jobwheel::SchedulerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = toml::from_str::<SchedulerConfig>(text)
        .ok()
        .or_else(|| serde_json::from_str::<SchedulerConfig>(text).ok());
    if let Some(c) = parsed {
        match c.validate() {
            Err(e) => assert!(
                e.field().is_some_and(|f| f.starts_with("config.")),
                "{e:?}"
            ),
            Ok(()) => {
                let _ = c.dead_after();
                let again: SchedulerConfig =
                    serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
                assert_eq!(again, c);
            }
        }
    }
});
