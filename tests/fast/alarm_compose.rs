//! Composition of alarms on a paused clock: fan-out over a `Vec`, `Option`, the
//! `Retrying` and `Throttled` wrappers, per-alarm delivery in the engine, and the
//! scheduler-wide throttle.

use crate::support;
use jobwheel::store::JobsExt as _;

use async_trait::async_trait;
use jobwheel::store::AlarmOutbox;
use jobwheel::{
    AlarmError, AlarmEvent, AlarmKind, AlarmPolicy, AlarmStatus, Job, JobAlarm, JobId, RetryPolicy,
    Retrying, Schedule, Scheduler, SchedulerConfig, Throttled,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records each event it hears; fails the first `fail_first` calls.
#[derive(Clone, Default)]
struct Probe {
    name: &'static str,
    heard: Arc<Mutex<Vec<AlarmEvent>>>,
    fail_first: Arc<Mutex<u32>>,
    retryable: bool,
}

impl Probe {
    fn new(name: &'static str, fail_first: u32, retryable: bool) -> Self {
        Probe {
            name,
            heard: Arc::default(),
            fail_first: Arc::new(Mutex::new(fail_first)),
            retryable,
        }
    }
    fn heard(&self) -> Vec<AlarmEvent> {
        self.heard.lock().unwrap().clone()
    }
}

#[async_trait]
impl JobAlarm for Probe {
    fn name(&self) -> &str {
        self.name
    }
    async fn alarm(&self, e: &AlarmEvent) -> Result<(), AlarmError> {
        self.heard.lock().unwrap().push(e.clone());
        let mut left = self.fail_first.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return Err(AlarmError {
                message: format!("{} down", self.name),
                retryable: self.retryable,
            });
        }
        Ok(())
    }
}

fn event(job: &str, kind: AlarmKind) -> AlarmEvent {
    AlarmEvent {
        kind,
        job_id: JobId::new(job).unwrap(),
        handler: "h".into(),
        run_id: None,
        fire_at: support::at("2026-01-01T00:00:00Z"),
        zone: "UTC".into(),
        attempt: 1,
        max_attempts: 1,
        node: "n".into(),
        duration_ms: None,
        error: None,
        will_retry: false,
        next_fire_at: None,
        recipients: vec![],
        occurred_at: support::at("2026-01-01T00:00:00Z"),
        suppressed: 0,
        covers: None,
        blocked: Vec::new(),
        waiting_for: Vec::new(),
    }
}

#[tokio::test]
async fn a_vec_delivers_to_each_alarm_on_its_own_and_none_is_a_no_op() {
    let (ok, bad) = (Probe::new("ok", 0, false), Probe::new("bad", 1, true));
    let all: Vec<Box<dyn JobAlarm>> = vec![Box::new(bad.clone()), Box::new(ok.clone())];
    let e = all.alarm(&event("j", AlarmKind::Lost)).await.unwrap_err();
    assert_eq!(e.message, "bad: bad down");
    assert!(e.retryable);
    assert_eq!(
        ok.heard().len(),
        1,
        "a failing alarm does not stop the others"
    );
    all.alarm(&event("j", AlarmKind::Lost)).await.unwrap();
    let off: Option<Probe> = None;
    off.alarm(&event("j", AlarmKind::Lost)).await.unwrap();
    assert_eq!(off.name(), "none");
    let on = Some(ok.clone());
    on.alarm(&event("j", AlarmKind::Lost)).await.unwrap();
    assert_eq!(ok.heard().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn retrying_retries_only_what_may_succeed() {
    let flaky = Probe::new("flaky", 2, true);
    let started = tokio::time::Instant::now();
    Retrying::new(flaky.clone(), 3, Duration::from_secs(1))
        .alarm(&event("j", AlarmKind::Failure))
        .await
        .unwrap();
    assert_eq!(flaky.heard().len(), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "waits 1 s then 2 s"
    );
    let broken = Probe::new("broken", 5, false);
    let e = Retrying::new(broken.clone(), 3, Duration::from_secs(1))
        .alarm(&event("j", AlarmKind::Failure))
        .await
        .unwrap_err();
    assert!(!e.retryable);
    assert_eq!(
        broken.heard().len(),
        1,
        "a permanent failure is not retried"
    );
}

#[tokio::test(start_paused = true)]
async fn throttled_lets_one_event_per_job_and_kind_through_and_counts_the_rest() {
    let probe = Probe::new("p", 0, false);
    let t = Throttled::new(probe.clone(), Duration::from_secs(60));
    for _ in 0..3 {
        t.alarm(&event("a", AlarmKind::Failure)).await.unwrap();
    }
    t.alarm(&event("a", AlarmKind::Lost)).await.unwrap();
    t.alarm(&event("b", AlarmKind::Failure)).await.unwrap();
    let kinds: Vec<(String, AlarmKind)> = probe
        .heard()
        .iter()
        .map(|e| (e.job_id.to_string(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("a".into(), AlarmKind::Failure),
            ("a".into(), AlarmKind::Lost),
            ("b".into(), AlarmKind::Failure)
        ]
    );
    tokio::time::sleep(Duration::from_secs(61)).await;
    t.alarm(&event("a", AlarmKind::Failure)).await.unwrap();
    let last = probe.heard().pop().unwrap();
    assert_eq!(
        last.suppressed, 2,
        "the next event mentions the two suppressed ones"
    );
    // A failed delivery keeps the count for the next try.
    let failing = Probe::new("f", 0, true);
    let t = Throttled::new(failing.clone(), Duration::from_secs(60));
    t.alarm(&event("a", AlarmKind::Failure)).await.unwrap();
    t.alarm(&event("a", AlarmKind::Failure)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    *failing.fail_first.lock().unwrap() = 1;
    assert!(t.alarm(&event("a", AlarmKind::Failure)).await.is_err());
    t.alarm(&event("a", AlarmKind::Failure)).await.unwrap();
    assert_eq!(failing.heard().last().unwrap().suppressed, 1);
}

fn failing_job(id: &str) -> Job {
    Job::builder(id, "fail", Schedule::every(Duration::from_secs(1)).unwrap())
        .retry(RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1)).unwrap())
        .alarm(AlarmPolicy {
            events: vec![AlarmKind::FinalFailure],
            recipients: vec![],
            ..AlarmPolicy::default()
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_engine_retries_only_the_alarm_that_failed() {
    let (store, locks, _clock) = support::backend("2026-01-01T00:00:00Z");
    let (good, flaky) = (Probe::new("good", 0, false), Probe::new("flaky", 1, true));
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("fail", |_ctx: jobwheel::JobContext| async {
            Err(jobwheel::JobError::msg("boom"))
        })
        .alarm(good.clone())
        .alarm(flaky.clone())
        .config(support::config("n1").alarm_retry_base(Duration::from_secs(1)))
        .build()
        .unwrap();
    let running = s.start().await.unwrap();
    running
        .scheduler()
        .upsert(
            Job::builder(
                "once",
                "fail",
                Schedule::once(support::at("2026-01-01T00:00:01Z")),
            )
            .retry(RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1)).unwrap())
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    running.shutdown().await;
    let events = store.alarms(&jobwheel::AlarmQuery::new(10)).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status, AlarmStatus::Sent);
    assert_eq!(events[0].attempts, 2, "delivered on the second attempt");
    assert_eq!(flaky.heard().len(), 2);
    assert_eq!(
        good.heard().len(),
        1,
        "the alarm that took it is not called again"
    );
}

#[tokio::test(start_paused = true)]
async fn the_scheduler_throttle_records_suppressed_events_as_not_needed() {
    let (store, locks, _clock) = support::backend("2026-01-01T00:00:00Z");
    let probe = Probe::new("p", 0, false);
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("fail", |_ctx: jobwheel::JobContext| async {
            Err(jobwheel::JobError::msg("boom"))
        })
        .alarm(probe.clone())
        .config(support::config("n1").alarm_throttle(Duration::from_secs(10)))
        .build()
        .unwrap();
    let running = s.start().await.unwrap();
    running
        .scheduler()
        .upsert(failing_job("every-second"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(14_500)).await;
    running.shutdown().await;
    let mut events = store.alarms(&jobwheel::AlarmQuery::new(100)).await.unwrap();
    events.reverse();
    let statuses: Vec<AlarmStatus> = events.iter().map(|a| a.status).collect();
    assert!(
        events.len() >= 13,
        "one final failure per second: {statuses:?}"
    );
    assert_eq!(statuses[0], AlarmStatus::Sent);
    let sent: Vec<usize> = statuses
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == AlarmStatus::Sent)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(sent.len(), 2, "one per 10 s window: {statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|s| matches!(s, AlarmStatus::Sent | AlarmStatus::NotNeeded))
    );
    let heard = probe.heard();
    assert_eq!(heard.len(), 2);
    assert_eq!(heard[0].suppressed, 0);
    assert_eq!(
        heard[1].suppressed as usize,
        sent[1] - 1,
        "the second names those suppressed"
    );
    let bad = SchedulerConfig::default().alarm_throttle(Duration::ZERO);
    assert_eq!(
        bad.validate().unwrap_err().field(),
        Some("config.alarm_throttle")
    );
}

/// The warnings a subscriber heard, by their message.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Message<'a>(&'a mut String);
        impl tracing::field::Visit for Message<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    *self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Message(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
}

/// A scheduler with jobs that name alarm events and no alarm says so once at
/// start; with an alarm, or with jobs that name none, it says nothing.
#[tokio::test(start_paused = true)]
async fn a_scheduler_whose_alarm_events_reach_nobody_warns_at_start() {
    use tracing_subscriber::layer::SubscriberExt;
    let heard = Warnings::default();
    let _guard = support::scoped_subscriber(tracing_subscriber::registry().with(heard.clone()));
    let nowhere = |heard: &Warnings| {
        heard
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.contains("no alarm is registered"))
            .count()
    };
    let start = |events: Vec<AlarmKind>, alarm: Option<Probe>| async move {
        let (store, locks, _clock) = support::backend("2026-01-01T00:00:00Z");
        let policy = AlarmPolicy {
            events,
            ..AlarmPolicy::default()
        };
        let job = Job::builder(
            "report",
            "noop",
            Schedule::every(Duration::from_secs(3600)).unwrap(),
        )
        .alarm(policy)
        .build()
        .unwrap();
        {
            store.upsert(&job, None).await.unwrap();
        }
        let mut b = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("noop", |_ctx: jobwheel::JobContext| async {
                Ok::<(), jobwheel::JobError>(())
            })
            .config(support::config("n1"));
        if let Some(a) = alarm {
            b = b.alarm(a);
        }
        let h = b.build().unwrap().start().await.unwrap();
        h.shutdown().await;
    };
    start(AlarmPolicy::default().events, None).await;
    assert_eq!(
        nowhere(&heard),
        1,
        "warned once: {:?}",
        heard.0.lock().unwrap()
    );
    start(
        AlarmPolicy::default().events,
        Some(Probe::new("probe", 0, true)),
    )
    .await;
    start(Vec::new(), None).await;
    assert_eq!(
        nowhere(&heard),
        1,
        "no more warnings: {:?}",
        heard.0.lock().unwrap()
    );
}
