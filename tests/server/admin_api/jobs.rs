//! Jobs: create (CSRF, roles, validation, size), read, next fires, cron preview,
//! group limits, operator actions, update, copy, remove — each change audited.

use super::support::admin::*;
use super::{Ctx, JOB, cron_job, last_audit};
use jobwheel::prelude::*;
use serde_json::json;

pub async fn create_read_act(c: &Ctx) {
    let Ctx {
        api,
        admin,
        viewer_token,
        ada,
        otto,
        vera,
        olga,
        ..
    } = c;
    // What the job form shows for the fields a definition leaves out: the
    // library's own defaults, and the payload limit in force.
    let d = api
        .call(vera, "GET", "/api/v1/defaults", "/api/v1/defaults", None)
        .await;
    assert_eq!(d.status, 200, "{}", d.body);
    let lib = serde_json::to_value(
        Job::builder(
            "d",
            "h",
            Schedule::every(std::time::Duration::from_secs(60)).unwrap(),
        )
        .build()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&d.body["retry"], &d.body["misfire"], &d.body["alarm"]),
        (&lib["retry"], &lib["misfire"], &lib["alarm"]),
        "the defaults are the library's"
    );
    assert_eq!(
        d.body["max_payload_bytes"],
        json!(SchedulerConfig::default().max_payload_bytes)
    );
    assert_eq!(
        d.body["alarms"],
        json!(["webhook"]),
        "the alarms this server sends through, by kind"
    );
    assert_eq!(
        d.body["routings"].as_array().unwrap().len(),
        jobwheel::placement::Routing::ALL.len()
    );
    assert_eq!(
        api.call(
            &Who::Anon,
            "GET",
            "/api/v1/defaults",
            "/api/v1/defaults",
            None
        )
        .await
        .status,
        401
    );
    // Creating a job: CSRF on session changes, roles, validation, size.
    let job = cron_job(JOB, "0 30 9 * * ?", "chatty");
    let body = || serde_json::to_vec(&job).unwrap();
    let a = api
        .call(
            &ada.without_csrf(),
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs",
            Some(body()),
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (403, Some("csrf")),
        "a session change needs its CSRF token"
    );
    let wrong = Who::Session {
        cookie: match &ada {
            Who::Session { cookie, .. } => cookie.clone(),
            _ => unreachable!(),
        },
        csrf: Some("0".repeat(64)),
    };
    assert_eq!(
        api.call(&wrong, "POST", "/api/v1/jobs", "/api/v1/jobs", Some(body()))
            .await
            .status,
        403
    );
    for who in [&vera, &otto, &viewer_token] {
        let a = api
            .call(who, "POST", "/api/v1/jobs", "/api/v1/jobs", Some(body()))
            .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (403, Some("forbidden")),
            "{who:?} may not create"
        );
    }
    let bad = cron_job("bad.cron", "0 61 9 * * ?", "chatty");
    let a = api
        .send(admin, "POST", "/api/v1/jobs", "/api/v1/jobs", bad)
        .await;
    assert_eq!(
        (a.status, a.body["field"].as_str(), a.body["value"].as_str()),
        (400, Some("job"), Some("schedule")),
        "{}",
        a.body
    );
    assert!(
        a.body["message"].as_str().unwrap().contains("61"),
        "{}",
        a.body
    );
    let mut unknown = job.clone();
    unknown["colour"] = json!("red");
    let a = api
        .send(admin, "POST", "/api/v1/jobs", "/api/v1/jobs", unknown)
        .await;
    assert_eq!(
        (a.status, a.body["field"].as_str(), a.body["value"].as_str()),
        (400, Some("job"), Some("colour")),
        "an unknown field is refused, naming it: {}",
        a.body
    );
    let mut huge = job.clone();
    huge["payload"] = json!({"blob": "x".repeat(100_000)});
    let a = api
        .send(admin, "POST", "/api/v1/jobs", "/api/v1/jobs", huge)
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (413, Some("too_large"))
    );
    let a = api
        .call(ada, "POST", "/api/v1/jobs", "/api/v1/jobs", Some(body()))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(
        a.body["job"]["payload"]["note"], "<script>alert(1)</script>",
        "text is stored as given"
    );
    let first = a.body["next_fire_at"].as_str().unwrap().to_string();
    let want = jobwheel::CronSchedule::new("0 30 9 * * ?", "Asia/Shanghai")
        .unwrap()
        .next_after(Timestamp::now())
        .unwrap();
    assert_eq!(
        first,
        want.to_string(),
        "the first fire is the schedule's next"
    );
    let a = api
        .call(ada, "POST", "/api/v1/jobs", "/api/v1/jobs", Some(body()))
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    let entry = last_audit(api, admin, JOB).await;
    assert_eq!(
        (entry["actor"].as_str(), entry["action"].as_str()),
        (Some("user:ada"), Some("job.create"))
    );
    assert_eq!(entry["after"]["job"]["schedule"]["expr"], "0 30 9 * * ?");
    assert!(entry["before"].is_null());

    // Reading it, and its next fires in its zone.
    let path = format!("/api/v1/jobs/{JOB}");
    let a = api
        .call(vera, "GET", "/api/v1/jobs/{id}", &path, None)
        .await;
    assert_eq!((a.status, a.body["job"]["id"].as_str()), (200, Some(JOB)));
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/jobs/{id}/fires",
            &format!("{path}/fires?next=3"),
            None,
        )
        .await;
    let fires: Vec<&str> = a.body["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["local"].as_str().unwrap())
        .collect();
    assert_eq!(fires.len(), 3);
    assert!(
        fires.iter().all(|f| f.ends_with("T09:30:00+08:00")),
        "{fires:?}"
    );
    let a = api
        .call(vera, "GET", "/api/v1/cron/preview", "/api/v1/cron/preview?expr=0+0%2F15+9-17+%3F+*+MON-FRI&zone=Asia%2FShanghai&next=2&after=2026-12-04T00:00:00Z", None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["fires"][0]["local"], "2026-12-04T09:00:00+08:00");
    assert_eq!(a.body["fires"][1]["local"], "2026-12-04T09:15:00+08:00");
    assert_eq!(
        a.body["description"], "Every 15 minutes, between 09:00 and 17:59, Monday through Friday",
        "{}",
        a.body
    );
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/cron/preview",
            "/api/v1/cron/preview?expr=0+0+25+*+*+%3F&zone=Mars%2FOlympus",
            None,
        )
        .await;
    assert_eq!(a.status, 400);
    assert!(
        a.body["field"].as_str().unwrap().starts_with("schedule"),
        "{}",
        a.body
    );

    // A limited operator does not see the group's job.
    assert_eq!(
        api.call(olga, "GET", "/api/v1/jobs/{id}", &path, None)
            .await
            .status,
        404
    );
    let a = api
        .call(olga, "GET", "/api/v1/jobs", "/api/v1/jobs", None)
        .await;
    assert!(a.body["items"].as_array().unwrap().is_empty(), "{}", a.body);
    assert_eq!(
        api.call(
            olga,
            "POST",
            "/api/v1/jobs/{id}/pause",
            &format!("{path}/pause"),
            None
        )
        .await
        .status,
        404
    );

    // Operator actions, each audited with the state before and after.
    for who in [&vera, &viewer_token] {
        let a = api
            .call(
                who,
                "POST",
                "/api/v1/jobs/{id}/pause",
                &format!("{path}/pause"),
                None,
            )
            .await;
        assert_eq!(a.status, 403, "a viewer may not pause");
    }
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/jobs/{id}/pause",
            &format!("{path}/pause"),
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["job"]["enabled"].as_bool()),
        (200, Some(false))
    );
    let e = last_audit(api, admin, JOB).await;
    assert_eq!(
        (e["actor"].as_str(), e["action"].as_str()),
        (Some("user:otto"), Some("job.pause"))
    );
    assert_eq!(
        (
            e["before"]["job"]["enabled"].as_bool(),
            e["after"]["job"]["enabled"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/jobs/{id}/resume",
            &format!("{path}/resume"),
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["next_fire_at"].as_str()),
        (200, Some(first.as_str()))
    );
    assert_eq!(last_audit(api, admin, JOB).await["action"], "job.resume");

    // Updating, copying, removing.
    let mut edited = job.clone();
    edited["schedule"]["expr"] = json!("0 0 8 * * ?");
    let a = api
        .send(ada, "PUT", "/api/v1/jobs/{id}", &path, edited.clone())
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let e = last_audit(api, admin, JOB).await;
    assert_eq!(
        (
            e["before"]["job"]["schedule"]["expr"].as_str(),
            e["after"]["job"]["schedule"]["expr"].as_str()
        ),
        (Some("0 30 9 * * ?"), Some("0 0 8 * * ?"))
    );
    let a = api
        .send(
            ada,
            "PUT",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/other.id",
            edited.clone(),
        )
        .await;
    assert_eq!((a.status, a.body["field"].as_str()), (400, Some("job.id")));
    let a = api
        .send(otto, "PUT", "/api/v1/jobs/{id}", &path, edited)
        .await;
    assert_eq!(a.status, 403);
    let a = api
        .send(
            ada,
            "POST",
            "/api/v1/jobs/{id}/copy",
            &format!("{path}/copy"),
            json!({"id": "report.copy"}),
        )
        .await;
    assert_eq!(
        (a.status, a.body["job"]["schedule"]["expr"].as_str()),
        (201, Some("0 0 8 * * ?"))
    );
    let a = api
        .send(
            ada,
            "POST",
            "/api/v1/jobs/{id}/copy",
            &format!("{path}/copy"),
            json!({"id": "bad id!"}),
        )
        .await;
    assert_eq!((a.status, a.body["field"].as_str()), (400, Some("job.id")));
    // Ids no URL could address (dot-segments) are refused as copies and as jobs.
    for id in [".", ".."] {
        let a = api
            .send(
                ada,
                "POST",
                "/api/v1/jobs/{id}/copy",
                &format!("{path}/copy"),
                json!({ "id": id }),
            )
            .await;
        assert_eq!(
            (a.status, a.body["field"].as_str()),
            (400, Some("job.id")),
            "{id}"
        );
        let mut dotted = super::cron_job("x", "0 0 8 * * ?", "echo");
        dotted["id"] = json!(id);
        let a = api
            .send(ada, "POST", "/api/v1/jobs", "/api/v1/jobs", dotted)
            .await;
        assert_eq!(
            (a.status, a.body["field"].as_str()),
            (400, Some("job.id")),
            "{id}"
        );
    }
    let a = api
        .call(
            otto,
            "DELETE",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/report.copy",
            None,
        )
        .await;
    assert_eq!(a.status, 403);
    let a = api
        .call(
            ada,
            "DELETE",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/report.copy",
            None,
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        last_audit(api, admin, "report.copy").await["action"],
        "job.remove"
    );
    assert_eq!(
        api.call(
            vera,
            "GET",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/report.copy",
            None
        )
        .await
        .status,
        404
    );
}

/// A job's dependencies as each caller may see them: parents of groups the caller
/// is not limited to are left out, a job of such a group is not found, and many
/// requests at once answer alike.
pub async fn dependencies_as_each_caller_sees_them(c: &Ctx) {
    let Ctx { api, ada, olga, .. } = c;
    let create = |id: &str, group: &str, children: serde_json::Value| {
        serde_json::to_vec(&json!({
            "id": id, "handler": "echo", "schedule": {"kind": "never"},
            "remote": {"group": group}, "children": children,
        }))
        .unwrap()
    };
    for (id, group, children) in [
        ("dep.child", "other", json!([])),
        ("dep.billing", "billing", json!([{"job": "dep.child"}])),
        (
            "dep.other",
            "other",
            json!([{"job": "dep.child", "on": "always"}]),
        ),
    ] {
        let a = api
            .call(
                ada,
                "POST",
                "/api/v1/jobs",
                "/api/v1/jobs",
                Some(create(id, group, children)),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let doc = "/api/v1/jobs/{id}/dependencies";
    let path = |id: &str| format!("/api/v1/jobs/{id}/dependencies");
    let all = api.call(ada, "GET", doc, &path("dep.child"), None).await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(
        all.body["parents"],
        json!([{"job": "dep.billing", "on": "success"}, {"job": "dep.other", "on": "always"}])
    );
    assert_eq!(all.body["parents_complete"], true);
    let up = api.call(ada, "GET", doc, &path("dep.billing"), None).await;
    assert_eq!(
        up.body["children"],
        json!([{"job": "dep.child", "on": "success"}])
    );
    // Olga operates group `other` only: billing's parent is not hers to see.
    let mine = api.call(olga, "GET", doc, &path("dep.child"), None).await;
    assert_eq!(mine.status, 200, "{}", mine.body);
    assert_eq!(
        mine.body["parents"],
        json!([{"job": "dep.other", "on": "always"}])
    );
    assert_eq!(
        api.call(olga, "GET", doc, &path("dep.billing"), None)
            .await
            .status,
        404
    );
    assert_eq!(
        api.call(olga, "GET", doc, &path("dep.nope"), None)
            .await
            .status,
        404
    );
    // Many at once, from both callers: each answer is the caller's.
    let answers = futures::future::join_all((0..24).map(|i| {
        let who = if i % 2 == 0 { ada } else { olga };
        let p = path("dep.child");
        async move { (i, api.call(who, "GET", doc, &p, None).await) }
    }))
    .await;
    for (i, a) in answers {
        let want = if i % 2 == 0 { &all.body } else { &mine.body };
        assert_eq!((a.status, &a.body), (200, want), "request {i}");
    }
    for id in ["dep.billing", "dep.other", "dep.child"] {
        let p = format!("/api/v1/jobs/{id}");
        assert_eq!(
            api.call(ada, "DELETE", "/api/v1/jobs/{id}", &p, None)
                .await
                .status,
            200
        );
    }
}
