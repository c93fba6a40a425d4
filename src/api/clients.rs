//! Client keys (create, change, revoke, list with usage), usage reports (JSON and CSV) and
//! `GET /metrics`.

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::json::{object_body, JsonBody};
use super::state::AppState;
use crate::clients::ClientPolicy;
use crate::gateway::Core;

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("store_failed", e)
}

fn invalid(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::field(param, message)
}

fn not_found(id: &str) -> ApiError {
    ApiError::missing(
        "key_not_found",
        "id",
        crate::i18n::msg(
            "No active key `{id}`; keys from the configuration or gateway.key are changed there.",
            &[("id", id)],
        ),
    )
}

fn edit_error(e: crate::store::EditError, id: &str) -> ApiError {
    match e {
        crate::store::EditError::NotFound(_) => not_found(id),
        other => internal(other),
    }
}

/// Parses policy fields (camelCase, as in `GET /admin/keys`) and checks them against this
/// gateway's routes and providers. `expiresAt` (RFC 3339) is accepted for `expiresMs`.
fn parse_policy(core: &Core, mut v: Map<String, Value>) -> Result<ClientPolicy, ApiError> {
    if let Some(at) = v.remove("expiresAt") {
        match at {
            Value::Null => {
                v.insert("expiresMs".into(), Value::Null);
            }
            Value::String(s) => {
                let ts: jiff::Timestamp = s.parse().map_err(|e: jiff::Error| {
                    invalid(
                        "expiresAt",
                        crate::i18n::msg(
                            "`{s}` is not an RFC 3339 time such as 2027-01-31T00:00:00Z ({e})",
                            &[("s", &s.to_string()), ("e", &e.to_string())],
                        ),
                    )
                })?;
                v.insert("expiresMs".into(), Value::from(ts.as_millisecond()));
            }
            _ => return Err(invalid("expiresAt", "send an RFC 3339 time string")),
        }
    }
    v.retain(|_, val| !val.is_null());
    let de = Value::Object(v);
    let policy: ClientPolicy = serde_path_to_error::deserialize(&de).map_err(|e| {
        let path = e.path().to_string();
        let msg = super::error::plain_serde(&e.inner().to_string());
        invalid(if path == "." { "body" } else { &path }, msg)
    })?;
    let snap = core.routing.snapshot.load();
    policy
        .validate(&|name| snap.resolve(name).is_ok())
        .map_err(|e| invalid(&e.param, e.message))?;
    Ok(policy)
}

fn key_json(core: &Core, k: &crate::store::ClientKeyRow) -> Value {
    let now = core.routing.clock.now_ms();
    let mut v = serde_json::to_value(k).unwrap_or_default();
    v["usage"] = serde_json::to_value(core.clients.usage(&k.id, now)).unwrap_or_default();
    let p = &k.policy;
    v["state"] = Value::from(if p.disabled {
        "disabled"
    } else if p.expires_ms.is_some_and(|at| at <= now) {
        "expired"
    } else {
        "active"
    });
    v
}

/// `GET /admin/keys`: every client key, masked, with its policy and this period's usage.
pub async fn list_keys(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let fixed: Vec<Value> = core
        .keys
        .fixed()
        .into_iter()
        .map(|(client, masked)| {
            let label = &client.label;
            let generated = label == "generated";
            let from = if generated {
                crate::i18n::msg("the data directory (gateway.key)", &[])
            } else {
                crate::i18n::msg("the configuration ({label})", &[("label", &label.to_string())])
            };
            // `source` says the same for a UI that words it in its own language.
            let source = if generated { "data-dir" } else { "config" };
            json!({"id": client.id, "label": label, "masked": masked, "from": from, "source": source,
                "policy": client.policy,
                "usage": core.clients.usage(&client.id, core.routing.clock.now_ms())})
        })
        .collect();
    let ui: Vec<Value> = core
        .store
        .client_keys()
        .map_err(internal)?
        .iter()
        .map(|k| key_json(core, k))
        .collect();
    Ok(Json(json!({"fixed": fixed, "ui": ui})))
}

object_body!(
    /// A new client key's body.
    NewKey,
    r#"{"label": "who uses it", …limits}"#
);

object_body!(
    /// A client key's policy changes.
    KeyPatch,
    "a JSON object of policy fields"
);

/// `POST /admin/keys` with `{"label": "…", …policy}`: a new client key, shown in this answer
/// only.
pub async fn create_key(
    State(state): State<AppState>,
    JsonBody(NewKey(mut v)): JsonBody<NewKey>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    let label = v
        .remove("label")
        .and_then(|l| l.as_str().map(str::to_string))
        .unwrap_or_default()
        .trim()
        .to_string();
    if label.is_empty() || label.chars().count() > 64 || label.chars().any(char::is_control) {
        return Err(invalid(
            "label",
            "give a label of 1-64 characters (who or what uses the key)",
        ));
    }
    let policy = parse_policy(core, v)?;
    let existing = core.store.client_keys().map_err(internal)?;
    if existing.iter().any(|k| k.label == label) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "label_taken",
            crate::i18n::msg(
                "A key labelled `{label}` exists already; pick another label or revoke that key.",
                &[("label", &label.to_string())],
            ),
        ));
    }
    let key = crate::auth::new_gateway_key();
    let row = crate::store::ClientKeyRow {
        id: format!(
            "k_{}",
            &crate::auth::new_gateway_key()[3..15].to_ascii_lowercase()
        ),
        label: label.clone(),
        hash: crate::auth::key_hash(&key),
        hint: crate::providers::Secret::new(key.clone()).masked(),
        created_ms: core.routing.clock.now_ms(),
        policy,
    };
    core.store.add_client_key(&row).map_err(internal)?;
    core.client_key_changed(&row.id).map_err(internal)?;
    tracing::info!(label = %label, id = %row.id, "client key created");
    let mut out = key_json(core, &row);
    out["key"] = Value::from(key);
    out["note"] = Value::from("Copy the key now: Baton keeps only a hash of it.");
    Ok((StatusCode::CREATED, Json(out)))
}

/// `PATCH /admin/keys/{id}`: changes the given policy fields (`null` removes one).
pub async fn update_key(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    JsonBody(KeyPatch(patch)): JsonBody<KeyPatch>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if patch.contains_key("label") {
        return Err(invalid(
            "label",
            "a key's label cannot change (logs refer to it); create a new key instead",
        ));
    }
    let keys = core.store.client_keys().map_err(internal)?;
    let current = keys
        .iter()
        .find(|k| k.id == id)
        .ok_or_else(|| not_found(&id))?;
    let mut merged = match serde_json::to_value(&current.policy) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in patch {
        merged.insert(k, v);
    }
    let policy = parse_policy(core, merged)?;
    core.store
        .set_client_policy(&id, &policy, core.routing.clock.now_ms())
        .map_err(|e| edit_error(e, &id))?;
    core.client_key_changed(&id).map_err(internal)?;
    tracing::info!(key = %id, "client key changed");
    let mut row = current.clone();
    row.policy = policy;
    Ok(Json(key_json(core, &row)))
}

/// `DELETE /admin/keys/{id}`: revokes a key at once.
pub async fn revoke_key(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    core.store
        .revoke_client_key(&id, core.routing.clock.now_ms())
        .map_err(|e| edit_error(e, &id))?;
    core.client_key_changed(&id).map_err(internal)?;
    tracing::info!(key = %id, "client key revoked");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageQuery {
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    /// `hour` or `day` (default `day`).
    bucket: Option<String>,
    /// `client` (default) or `provider`.
    by: Option<String>,
    client: Option<String>,
    /// `json` (default) or `csv`.
    format: Option<String>,
    /// An IANA time zone (`Europe/Paris`): hours and days are that zone's, DST included
    /// [default: UTC].
    tz: Option<String>,
}

/// `GET /admin/usage`: requests, tokens, estimated cost and failovers per client key or
/// provider over time, from the request log; `format=csv` downloads it.
pub async fn usage(
    State(state): State<AppState>,
    super::json::ApiQuery(q): super::json::ApiQuery<UsageQuery>,
) -> Result<Response, ApiError> {
    let core = &state.core;
    let bucket_ms = choice(
        "bucket",
        q.bucket.as_deref(),
        &[("day", 86_400_000), ("hour", 3_600_000)],
    )?;
    let by_provider = choice(
        "by",
        q.by.as_deref(),
        &[("client", false), ("provider", true)],
    )?;
    let csv = choice(
        "format",
        q.format.as_deref(),
        &[("json", false), ("csv", true)],
    )?;
    let now = core.routing.clock.now_ms();
    let until = q.until_ms.unwrap_or(now + 1);
    let since = q.since_ms.unwrap_or(until - 30 * 86_400_000);
    if since >= until {
        return Err(ApiError::invalid(
            "sinceMs",
            "sinceMs must be before untilMs",
        ));
    }
    // Rows written a moment ago are still in the writer's batch.
    core.store.writer().flush().await;
    let zone = zone(q.tz.as_deref())?;
    let rows = usage_rows(
        core,
        &q,
        (since, until),
        bucket_ms,
        by_provider,
        zone.as_ref(),
    )?;
    let labels = labels(core);
    let label_of = |k: &str| -> String {
        if by_provider {
            return k.to_string();
        }
        labels
            .iter()
            .find(|(id, _)| id == k)
            .map(|(_, l)| l.clone())
            .unwrap_or_else(|| k.to_string())
    };
    if csv {
        return Ok(usage_csv(&rows, &label_of, by_provider, zone.as_ref()));
    }
    let total = rows.iter().fold(json!({"requests": 0, "errors": 0, "failovers": 0, "inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0}), |mut t, r| {
        for (k, v) in [("requests", r.requests), ("errors", r.errors), ("failovers", r.failovers), ("inputTokens", r.input_tokens), ("outputTokens", r.output_tokens), ("cacheReadTokens", r.cache_read_tokens), ("cacheWriteTokens", r.cache_write_tokens)] {
            t[k] = Value::from(t[k].as_u64().unwrap_or(0) + v);
        }
        t["costUsd"] = Value::from(t["costUsd"].as_f64().unwrap_or(0.0) + r.cost_usd);
        t
    });
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["label"] = Value::from(label_of(&r.key));
            v
        })
        .collect();
    Ok(Json(json!({
        "sinceMs": since, "untilMs": until, "bucketMs": bucket_ms,
        "tz": zone.as_ref().and_then(|z| z.iana_name()).unwrap_or("UTC"),
        "by": if by_provider { "provider" } else { "client" },
        "rows": rows, "total": total,
    }))
    .into_response())
}

/// `tz`: the named IANA zone, or none (UTC) when not given.
fn zone(tz: Option<&str>) -> Result<Option<jiff::tz::TimeZone>, ApiError> {
    match tz.filter(|z| !z.is_empty()) {
        None => Ok(None),
        Some(name) => jiff::tz::TimeZone::get(name).map(Some).map_err(|_| {
            ApiError::invalid(
                "tz",
                crate::i18n::msg(
                    "unknown time zone “{name}”: give an IANA name such as Europe/Paris",
                    &[("name", name)],
                ),
            )
        }),
    }
}

/// The usage rows of the asked range in the asked buckets: straight from the log in UTC, or,
/// in a zone, minutes from the log folded into the zone's own hours or days (an offset is
/// always whole minutes; a day may be 23 or 25 hours long).
fn usage_rows(
    core: &crate::gateway::Core,
    q: &UsageQuery,
    (since, until): (i64, i64),
    bucket_ms: i64,
    by_provider: bool,
    zone: Option<&jiff::tz::TimeZone>,
) -> Result<Vec<crate::store::UsageRow>, ApiError> {
    let client = q.client.as_deref();
    Ok(match zone {
        Some(tz) => in_zone(
            core.store
                .usage(since, until, 60_000, by_provider, client)
                .map_err(internal)?,
            tz,
            bucket_ms == 3_600_000,
        ),
        None => core
            .store
            .usage(since, until, bucket_ms, by_provider, client)
            .map_err(internal)?,
    })
}

/// Minute rows summed into the hours or days of `tz` (by their local start), oldest first.
fn in_zone(
    rows: Vec<crate::store::UsageRow>,
    tz: &jiff::tz::TimeZone,
    hourly: bool,
) -> Vec<crate::store::UsageRow> {
    let start_of = |ms: i64| -> i64 {
        if !hourly {
            return crate::clock::day_bounds(ms, tz).0;
        }
        // The local hour's start: offsets are whole minutes (India's +05:30 included).
        let Ok(t) = jiff::Timestamp::from_millisecond(ms) else {
            return ms;
        };
        let off = i64::from(tz.to_offset(t).seconds()) * 1000;
        (ms + off).div_euclid(3_600_000) * 3_600_000 - off
    };
    let mut out: std::collections::BTreeMap<(i64, String), crate::store::UsageRow> =
        std::collections::BTreeMap::new();
    for r in rows {
        let start = start_of(r.start_ms);
        let e = out
            .entry((start, r.key.clone()))
            .or_insert_with(|| crate::store::UsageRow {
                start_ms: start,
                requests: 0,
                errors: 0,
                failovers: 0,
                input_tokens: 0,
                output_tokens: 0,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost_usd: 0.0,
                ..r.clone()
            });
        e.requests += r.requests;
        e.errors += r.errors;
        e.failovers += r.failovers;
        e.input_tokens += r.input_tokens;
        e.output_tokens += r.output_tokens;
        e.cache_read_tokens += r.cache_read_tokens;
        e.cache_write_tokens += r.cache_write_tokens;
        e.cost_usd += r.cost_usd;
    }
    out.into_values().collect()
}

/// The usage rows as a CSV download.
fn usage_csv(
    rows: &[crate::store::UsageRow],
    label_of: &dyn Fn(&str) -> String,
    by_provider: bool,
    zone: Option<&jiff::tz::TimeZone>,
) -> Response {
    let mut out = String::from(
        "start,key,label,requests,errors,failovers,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,estimated_cost_usd\n",
    );
    for r in rows {
        let start = jiff::Timestamp::from_millisecond(r.start_ms)
            .map(|t| match zone {
                // RFC 3339 with the zone's offset at that time.
                Some(tz) => t.display_with_offset(tz.to_offset(t)).to_string(),
                None => t.to_string(),
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "{start},{},{},{},{},{},{},{},{},{},{:.6}\n",
            csv_cell(&r.key),
            csv_cell(&label_of(&r.key)),
            r.requests,
            r.errors,
            r.failovers,
            r.input_tokens,
            r.output_tokens,
            r.cache_read_tokens,
            r.cache_write_tokens,
            r.cost_usd
        ));
    }
    let name = if by_provider {
        "baton-usage-by-provider.csv"
    } else {
        "baton-usage-by-client.csv"
    };
    let mut resp = out.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    resp
}

/// The value of a query parameter that must be one of `options` (the first is the default).
fn choice<T: Copy>(param: &str, given: Option<&str>, options: &[(&str, T)]) -> Result<T, ApiError> {
    let Some(given) = given else {
        return Ok(options[0].1);
    };
    options
        .iter()
        .find(|(name, _)| *name == given)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            ApiError::invalid(
                param,
                format!(
                    "`{given}` is not allowed for {param}; use {}",
                    names.join(" or ")
                ),
            )
        })
}

/// Client key ids and the labels people know them by.
fn labels(core: &Core) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = core
        .keys
        .managed()
        .iter()
        .map(|c| (c.id.clone(), c.label.clone()))
        .collect();
    // Revoked keys still appear in old log rows.
    if let Ok(all) = core.store.client_key_labels() {
        for (id, label) in all {
            if !out.iter().any(|(i, _)| *i == id) {
                out.push((id, format!("ui:{label}")));
            }
        }
    }
    out
}

/// One CSV field: quoted when needed, and never read as a formula by a spreadsheet.
fn csv_cell(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// `GET /metrics` (admin key): Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let core = &state.core;
    let text = core.metrics_text();
    let mut resp = text.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::csv_cell;

    #[test]
    fn csv_cells_are_quoted_and_defused() {
        assert_eq!(csv_cell("alice"), "alice");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
    }
}
