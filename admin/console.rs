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
const CORE_JS: &str = include_str!("console/core.js");
const PAGES_JS: &str = include_str!("console/pages.js");
const APP_JS: &str = include_str!("console/app.js");
const APP_CSS: &str = include_str!("console/app.css");
const CHART_JS: &str = include_str!("console/vendor/chart.umd.min.js");
const ICON: &str = include_str!("console/icon.svg");

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
    let js = "text/javascript; charset=utf-8";
    Router::new()
        .route("/", get(index))
        .route(
            "/assets/core.js",
            get(move || async move { asset(CORE_JS, js) }),
        )
        .route(
            "/assets/pages.js",
            get(move || async move { asset(PAGES_JS, js) }),
        )
        .route(
            "/assets/app.js",
            get(move || async move { asset(APP_JS, js) }),
        )
        .route(
            "/assets/chart.umd.min.js",
            get(move || async move { asset(CHART_JS, js) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route(
            "/assets/icon.svg",
            get(|| async { asset(ICON, "image/svg+xml") }),
        )
        .route(
            "/favicon.ico",
            get(|| async { asset(ICON, "image/svg+xml") }),
        )
}
