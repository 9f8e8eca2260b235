//! The stored-row decoder: any text read from a store's definition column either is
//! refused with an error naming `job.definition` (or the field) or is a job whose
//! schedule answers without panicking and which writes back to the same job.
#![no_main]

use jobwheel::{Job, Timestamp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Job::from_stored(text) {
        Err(e) => assert!(e.field().is_some(), "untyped error: {e:?}"),
        Ok(job) => {
            for t in [Timestamp::MIN, Timestamp::EPOCH, Timestamp::now(), Timestamp::MAX] {
                if let Some(next) = job.schedule().next_after(t) {
                    assert!(next > t);
                }
            }
            let text = serde_json::to_string(&job).unwrap();
            assert_eq!(Job::from_stored(&text).unwrap(), job);
        }
    }
});
