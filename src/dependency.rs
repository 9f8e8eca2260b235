//! Job dependencies: a job's **children**, each triggered once per fire of the job
//! that ends as the link asks, in the same atomic step that records the finish.
//!
//! A parent lists its children ([`Job::children`](crate::Job::children)); when a
//! fire of the parent ends for good (it succeeded, or failed with no retry left),
//! the engine puts one [`Release`] per matching child into the run's finish, and the
//! store writes them with the finish or not at all. A release is keyed by (child,
//! parent, the parent fire's instant): a second release with the same key is
//! ignored. The store queues releases per child and turns the oldest into the
//! child's next fire (trigger [`Upstream`](crate::TriggerKind::Upstream)) when the
//! child can take it — see [`rules::takes_release`](crate::store::rules::takes_release)
//! — so every release runs the child once, even when several arrive while it runs.
//! The run records which upstream run released it ([`FireContext::upstream`]).
//!
//! A job may also wait for several parents ([`Job::after`](crate::Job::after)): it
//! then takes their releases of one *logical instant* together, once every parent
//! released it ([`rules::pick_release`](crate::store::rules::pick_release)). A
//! released fire passes its upstream's instant down, so a diamond joins on its
//! origin's instant. A join may instead join by a window (an hour or a day of a
//! zone, [`JoinWindow`]): it then runs once per window every parent released, and
//! the store keeps a taken window's releases marked a while
//! ([`rules::WINDOW_KEPT`](crate::store::rules::WINDOW_KEPT)) so a parent's later
//! release of it is not queued again. A release that waits past the job's
//! [`wait_deadline`](crate::Job::wait_deadline) raises one `waiting` alarm per
//! instant. An operator releases an instant a join waits for, or skips it
//! ([`Ops::release_instant`](crate::ops::Ops::release_instant),
//! [`Ops::skip_instant`](crate::ops::Ops::skip_instant)). Cycles are refused when a
//! job is stored; at run time a chain of releases stops at [`MAX_DEPTH`].
//! docs/book/src/architecture.md ("Job dependencies") has a worked example.
//!
//! [`FireContext::upstream`]: crate::FireContext::upstream

pub use crate::links::{
    ChildLink, ChildOn, JoinWindow, MAX_CHILDREN, MAX_GRAPH_READS, WindowUnit, check_after,
    check_children, check_window,
};
pub use crate::record::{QueuedRelease, Release, UpstreamRun};

use crate::record::RunStatus;

impl ChildOn {
    /// Whether a fire whose run ended with `status` (and `will_retry`) triggers a
    /// child linked with this condition. A run that will be retried, a `misfired`
    /// record and a run given back unexecuted are not a fire's end and trigger
    /// nothing.
    pub fn matches(self, status: RunStatus, will_retry: bool) -> bool {
        if will_retry || matches!(status, RunStatus::Misfired | RunStatus::Returned) {
            return false;
        }
        let ok = status == RunStatus::Succeeded;
        let failed = status.is_failure();
        match self {
            ChildOn::Success => ok,
            ChildOn::Failure => failed,
            ChildOn::Always => ok || failed,
        }
    }
}

/// The longest chain of releases: a fire released at this depth releases no child
/// (the engine logs an error), so a cycle the upsert check could not see (two
/// upserts that each closed half of it at once) runs at most this many times.
pub const MAX_DEPTH: u32 = 64;

/// The stored context of a fire released by the upstream runs `upstream` (each as
/// a store keeps it, JSON): `{"upstream":[…]}`, the runs in the order given.
pub fn context_of<S: AsRef<str>>(upstream: &[S]) -> String {
    let runs: Vec<&str> = upstream.iter().map(AsRef::as_ref).collect();
    format!("{{\"upstream\":[{}]}}", runs.join(","))
}

/// The releases a run of `parent` that ended `from.status` (with `will_retry`)
/// writes: one per child whose link matches, in the order the parent lists them.
///
/// None when `from.depth` is past [`MAX_DEPTH`].
pub fn releases_of(parent: &crate::job::Job, from: &UpstreamRun, will_retry: bool) -> Vec<Release> {
    if from.depth > MAX_DEPTH {
        return Vec::new();
    }
    parent
        .children()
        .iter()
        .filter(|c| c.on.matches(from.status, will_retry))
        .map(|c| Release::new(c.job.clone(), from.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;

    fn id(s: &str) -> JobId {
        JobId::new(s).unwrap()
    }

    #[test]
    fn only_a_fires_end_releases() {
        use RunStatus::*;
        assert!(ChildOn::Success.matches(Succeeded, false));
        assert!(!ChildOn::Success.matches(Failed, false));
        assert!(!ChildOn::Failure.matches(Failed, true), "a retry follows");
        assert!(ChildOn::Failure.matches(Lost, false));
        assert!(ChildOn::Always.matches(TimedOut, false));
        for s in [Misfired, Returned, Running] {
            assert!(!ChildOn::Always.matches(s, false), "{s:?}");
        }
    }

    #[test]
    fn windows_start_at_the_wall_clock_hour_or_day() {
        let t = |s: &str| {
            crate::time::Timestamp::from_datetime(&chrono::DateTime::parse_from_rfc3339(s).unwrap())
        };
        let day = |z: &str| JoinWindow::new(WindowUnit::Day, z).unwrap();
        let hour = |z: &str| JoinWindow::new(WindowUnit::Hour, z).unwrap();
        let utc = day("UTC");
        assert_eq!(
            utc.start(t("2026-01-01T13:00:00Z")),
            t("2026-01-01T00:00:00Z")
        );
        assert_eq!(
            utc.start(t("2026-01-01T00:00:00Z")),
            t("2026-01-01T00:00:00Z")
        );
        // The Paris day the clocks go forward starts at midnight CET.
        let paris = day("Europe/Paris");
        assert_eq!(
            paris.start(t("2026-03-29T12:00:00Z")),
            t("2026-03-28T23:00:00Z")
        );
        assert_eq!(
            paris.start(t("2026-03-29T22:30:00Z")),
            t("2026-03-29T22:00:00Z")
        );
        // New York's repeated hour: each pass is its own hour.
        let ny = hour("America/New_York");
        assert_eq!(
            ny.start(t("2026-11-01T05:30:00Z")),
            t("2026-11-01T05:00:00Z")
        );
        assert_eq!(
            ny.start(t("2026-11-01T06:30:00Z")),
            t("2026-11-01T06:00:00Z")
        );
        // São Paulo's 2018 clocks went forward at midnight: the day starts at 01:00.
        let sp = day("America/Sao_Paulo");
        assert_eq!(
            sp.start(t("2018-11-04T12:00:00Z")),
            t("2018-11-04T03:00:00Z")
        );
        // Checks name the field.
        let e = JoinWindow::new(WindowUnit::Day, "Mars/Olympus").unwrap_err();
        assert_eq!(e.field(), Some("job.join_window.zone"));
        let e = check_window(Some(&utc), &[]).unwrap_err();
        assert_eq!(e.field(), Some("job.join_window"));
        assert!(check_window(Some(&utc), &[id("a")]).is_ok());
    }

    #[test]
    fn children_are_checked() {
        let a = id("a");
        assert!(check_children(&a, &[ChildLink::on_success(id("b"))]).is_ok());
        let e = check_children(&a, &[ChildLink::on_success(id("a"))]).unwrap_err();
        assert!(e.to_string().contains("job.children"), "{e}");
        let twice = [
            ChildLink::on_success(id("b")),
            ChildLink::on_success(id("b")),
        ];
        assert!(check_children(&a, &twice).is_err());
        let many: Vec<_> = (0..=MAX_CHILDREN)
            .map(|i| ChildLink::on_success(id(&format!("c{i}"))))
            .collect();
        assert!(check_children(&a, &many).is_err());
    }
}
