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
        ("secret", Box::new(|c| c.secret.0.clear())),
        ("secret", Box::new(|c| c.secret.0 = "short".into())),
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
    let e = jobwheel::admin::ServerConfig::from_toml("secret = \"x\"\nlisten_addr = \"a\"\n")
        .unwrap_err();
    assert!(e.to_string().contains("listen_addr"), "{e}");
    let mut c = good.clone();
    let env = |k: &str| match k {
        "JOBWHEEL_READ_ONLY" => Some("true".to_string()),
        "JOBWHEEL_SECRET" => Some("e".repeat(32)),
        _ => None,
    };
    c.override_from(env).unwrap();
    assert!(c.read_only);
    assert_eq!(c.secret.0, "e".repeat(32));
    let e = c
        .override_from(|k| (k == "JOBWHEEL_READ_ONLY").then(|| "maybe".into()))
        .unwrap_err();
    assert!(e.to_string().contains("JOBWHEEL_READ_ONLY"), "{e}");
    assert!(
        !format!("{good:?}").contains(&"s".repeat(40)),
        "Debug never prints the secret"
    );
}
