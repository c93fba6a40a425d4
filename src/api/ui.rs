//! The web UI (`ui/`), compiled into the binary so a headless install needs nothing beside it.
//! Served with a strict Content-Security-Policy: scripts and styles from this origin only.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../ui/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/api.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/views.js"),
    ),
    (
        "forms.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/forms.js"),
    ),
    (
        "setup.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/setup.js"),
    ),
    (
        "connect.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/connect.js"),
    ),
    (
        "routing.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/routing.js"),
    ),
    (
        "team.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/team.js"),
    ),
    (
        "updates.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/updates.js"),
    ),
    (
        "settings.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/settings.js"),
    ),
    (
        "websearch.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/websearch.js"),
    ),
    (
        "telemetry.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/telemetry.js"),
    ),
    (
        "i18n.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/i18n.js"),
    ),
    // The catalogue the UI, the tray and the notifications share (crate::i18n).
    (
        "locales/en.json",
        "application/json; charset=utf-8",
        include_str!("../../ui/locales/en.json"),
    ),
    (
        "locales/ja.json",
        "application/json; charset=utf-8",
        include_str!("../../ui/locales/ja.json"),
    ),
    (
        "locales/zh-CN.json",
        "application/json; charset=utf-8",
        include_str!("../../ui/locales/zh-CN.json"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../ui/style.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../../ui/icon.svg"),
    ),
];

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn redirect() -> Redirect {
    Redirect::permanent("/ui/")
}

pub async fn index() -> Response {
    file("index.html")
}

pub async fn asset(Path(name): Path<String>) -> Response {
    file(&name)
}

/// `/ui/locales/{file}`: a language's catalogue.
pub async fn locale(Path(name): Path<String>) -> Response {
    file(&format!("locales/{name}"))
}

fn file(name: &str) -> Response {
    let Some((_, mime, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such file in the UI").into_response();
    };
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (StatusCode::OK, h, *body).into_response()
}

#[cfg(test)]
mod tests {
    /// A module imported by the UI but not served breaks the whole page (an ES module import
    /// that 404s stops every script): each `./name.js` imported in ui/ is in `FILES`.
    #[test]
    fn every_imported_ui_module_is_served() {
        for (_, _, body) in super::FILES.iter().filter(|(n, _, _)| n.ends_with(".js")) {
            for part in body.split("from \"./").skip(1) {
                let name = part.split('"').next().unwrap_or_default();
                assert!(
                    super::FILES.iter().any(|(n, _, _)| *n == name),
                    "ui imports {name}, which src/api/ui.rs does not serve"
                );
            }
        }
    }
}
