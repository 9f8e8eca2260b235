//! The server's configuration: every bad field named, environment overrides,
//! secrets never printed.

use super::support::admin::*;
use std::time::Duration;

#[test]
fn the_configuration_names_every_bad_field() {
    let (good, _) = config(
        "sqlite://x.db",
        None,
        false,
        Some("http://127.0.0.1:9/hook"),
    );
    good.validate().unwrap();
    type Breaks = Box<dyn Fn(&mut jobwheel::admin::ServerConfig)>;
    let cases: Vec<(&str, Breaks)> = vec![
        ("session_secret", Box::new(|c| c.session_secret.0.clear())),
        (
            "session_secret",
            Box::new(|c| c.session_secret.0 = "short".into()),
        ),
        // A group's secret as the session secret: an executor holding it could
        // sign sessions.
        (
            "session_secret",
            Box::new(|c| c.session_secret = c.groups[0].secret.clone()),
        ),
        ("login_concurrency", Box::new(|c| c.login_concurrency = 0)),
        (
            "users.password_hash",
            Box::new(|c| {
                c.users[0].password_hash.0 = "$argon2id$v=19$m=1048576,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into()
            }),
        ),
        ("listen", Box::new(|c| c.listen = "nowhere".into())),
        ("max_body_bytes", Box::new(|c| c.max_body_bytes = 10)),
        (
            "session_ttl",
            Box::new(|c| c.session_ttl = Duration::from_secs(1)),
        ),
        (
            "users",
            Box::new(|c| {
                c.users.clear();
                c.tokens.clear();
            }),
        ),
        (
            "users.password_hash",
            Box::new(|c| c.users[0].password_hash.0 = "plain".into()),
        ),
        (
            "users.name",
            Box::new(|c| c.users[1].name = c.users[0].name.clone()),
        ),
        (
            "tokens.sha256",
            Box::new(|c| c.tokens[0].sha256 = "abc".into()),
        ),
        (
            "groups.secret",
            Box::new(|c| c.groups[0].secret.0 = "x".into()),
        ),
        (
            "webhook.url",
            Box::new(|c| c.webhook_alarms[0].url = "ftp://x".into()),
        ),
        (
            "webhook.format",
            Box::new(|c| c.webhook_alarms[0].format = Some("teams".into())),
        ),
        (
            "email.from",
            Box::new(|c| {
                let extra = jobwheel::admin::ServerConfig::from_toml(
                    "[[email_alarms]]\nhost = \"smtp.example.com\"\nfrom = \"not an address\"\n",
                )
                .unwrap();
                c.email_alarms = extra.email_alarms;
            }),
        ),
    ];
    for (field, break_it) in cases {
        let mut c = good.clone();
        break_it(&mut c);
        match c.validate() {
            Err(jobwheel::Error::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected Invalid, got {other:?}"),
        }
    }
    let e =
        jobwheel::admin::ServerConfig::from_toml("session_secret = \"x\"\nlisten_addr = \"a\"\n")
            .unwrap_err();
    assert!(e.to_string().contains("listen_addr"), "{e}");
    let mut c = good.clone();
    let env = |k: &str| match k {
        "JOBWHEEL_READ_ONLY" => Some("true".to_string()),
        "JOBWHEEL_SESSION_SECRET" => Some("e".repeat(32)),
        "JOBWHEEL_LOGIN_CONCURRENCY" => Some("3".to_string()),
        _ => None,
    };
    c.override_from(env).unwrap();
    assert!(c.read_only);
    assert_eq!(c.session_secret.0, "e".repeat(32));
    assert_eq!(c.login_concurrency, 3);
    // The variable that once named the session secret, and that executors were
    // given for their group's, is refused rather than silently taken as either.
    let e = good
        .clone()
        .override_from(|k| (k == "JOBWHEEL_SECRET").then(|| "e".repeat(32)))
        .unwrap_err();
    assert!(
        e.to_string().contains("JOBWHEEL_SESSION_SECRET") && !e.to_string().contains("eeee"),
        "{e}"
    );
    let e = c
        .override_from(|k| (k == "JOBWHEEL_READ_ONLY").then(|| "maybe".into()))
        .unwrap_err();
    assert!(e.to_string().contains("JOBWHEEL_READ_ONLY"), "{e}");
    assert!(
        !format!("{good:?}").contains(&"s".repeat(40)),
        "Debug never prints the secret"
    );
}
