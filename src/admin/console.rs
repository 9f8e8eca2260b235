//! The web console: a page and its scripts, embedded in the binary (it works
//! offline; nothing is fetched from elsewhere, and nothing needs Node.js to build).
//! Chart.js (MIT, `console/vendor/`) draws the overview's chart.
//!
//! The page is served with a Content Security Policy that allows scripts, styles and
//! requests from this server only (no inline script, no `eval`, no framing), and the
//! scripts put every text from the API into the page as text nodes: a job id, a
//! payload or an error message holding `<script>` shows as those characters.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("console/index.html");
const JS: &str = "text/javascript; charset=utf-8";

/// The assets: path, content type, body.
const ASSETS: [(&str, &str, &str); 10] = [
    ("/assets/core.js", JS, include_str!("console/core.js")),
    ("/assets/pages.js", JS, include_str!("console/pages.js")),
    ("/assets/jobs.js", JS, include_str!("console/jobs.js")),
    ("/assets/runs.js", JS, include_str!("console/runs.js")),
    (
        "/assets/dependencies.js",
        JS,
        include_str!("console/dependencies.js"),
    ),
    ("/assets/app.js", JS, include_str!("console/app.js")),
    (
        "/assets/chart.umd.min.js",
        JS,
        include_str!("console/vendor/chart.umd.min.js"),
    ),
    (
        "/assets/app.css",
        "text/css; charset=utf-8",
        include_str!("console/app.css"),
    ),
    (
        "/assets/icon.svg",
        "image/svg+xml",
        include_str!("console/icon.svg"),
    ),
    (
        "/favicon.ico",
        "image/svg+xml",
        include_str!("console/icon.svg"),
    ),
];

/// The policy the page is served with.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

async fn index() -> Response {
    let mut r = asset(INDEX, "text/html; charset=utf-8");
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// The console's routes: `/` and `/assets/*`.
pub(crate) fn routes() -> Router {
    ASSETS.iter().fold(
        Router::new().route("/", get(index)),
        |router, &(path, kind, body)| {
            router.route(path, get(move || async move { asset(body, kind) }))
        },
    )
}
