//! `baton probe`: one cheap real request per provider key and model (a one-token answer),
//! with its latency or the classified error — the same classification routing uses.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use baton::config::ProviderConfig;
use baton::limits::{self, ErrorClass, ResetContext};
use baton::providers::{self, outbound, ProviderRuntime};

/// The outcome for one key and model.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    pub provider: String,
    pub key: Option<String>,
    pub model: String,
    /// `ok`, `unavailable` or an error class (`rate`, `auth`, `transient`…).
    pub class: Verdict,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub reason: Option<String>,
    pub reset_at_ms: Option<i64>,
    /// What the running Baton says of the provider now (its summary's line), when one answers:
    /// the probe's verdict beside the gateway's state, in the same words `baton status` uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySays>,
}

/// A provider's state in the running Baton's summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySays {
    /// ready | login-only | cooling | breaker-open | logged-out | unavailable | disabled
    pub state: String,
    pub until_ms: Option<i64>,
}

/// Puts the running Baton's word for each probed provider beside its verdict.
pub fn attach(results: &mut [ProbeResult], summary: &baton::summary::Summary) {
    for r in results {
        r.gateway = summary.provider(&r.provider).map(|p| GatewaySays {
            state: p.shown.as_str().to_string(),
            until_ms: p.status.until_ms.filter(|u| *u > summary.now_ms),
        });
    }
}

impl ProbeResult {
    pub fn ok(&self) -> bool {
        self.class == Verdict::Ok
    }

    /// Nothing wrong was found: it answered, or it is not Baton's to test (a login-only
    /// provider).
    pub fn fine(&self) -> bool {
        matches!(self.class, Verdict::Ok | Verdict::LoginOnly)
    }
}

/// Why a login-only provider is not probed.
const LOGIN_ONLY: &str = "login-only: it calls with the client's own login, which Baton never holds; a client's request tests it";

/// What a probe found: written as `ok`, `unavailable` or the error class's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// A subscription CLI that is not installed or cannot run.
    Unavailable,
    /// A `credentials: "client"` provider: it serves only clients that bring their own login,
    /// which Baton never holds, so there is nothing it could send (and nothing to cool).
    LoginOnly,
    /// A subscription CLI whose login is gone (its own check said so; the running Baton checks
    /// it too, so `--apply` writes nothing).
    LoggedOut,
    /// The probe could not test it (no key in this shell, no HTTP client): the probe's own
    /// failure, never written as the provider's words.
    NotTested,
    Failed(ErrorClass),
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Unavailable => "unavailable",
            Verdict::LoginOnly => "login-only",
            Verdict::LoggedOut => "logged-out",
            Verdict::NotTested => "not-tested",
            Verdict::Failed(c) => c.as_str(),
        }
    }
}

impl Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Probes every key × model of `providers` (only the first model of each unless `all_models`).
pub async fn run(
    providers: &[ProviderConfig],
    all_models: bool,
    mut progress: impl FnMut(usize, usize, &str),
) -> Vec<ProbeResult> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clients = providers::HttpClients::default();
    let env = |name: &str| std::env::var(name).ok();
    let mut jobs = Vec::new();
    for cfg in providers {
        let entry = providers::resolve::resolve(
            cfg.clone(),
            std::sync::Arc::new(ProviderRuntime::new(None)),
            &env,
        );
        let models: Vec<String> = entry
            .models
            .iter()
            .take(if all_models { usize::MAX } else { 1 })
            .map(|m| m.id.clone())
            .collect();
        let keys: Vec<Option<usize>> = if entry.keys.is_empty() {
            vec![None]
        } else {
            (0..entry.keys.len()).map(Some).collect()
        };
        let entry = std::sync::Arc::new(entry);
        for m in &models {
            for k in &keys {
                jobs.push((entry.clone(), *k, m.clone()));
            }
        }
    }
    let total = jobs.len();
    let mut out = Vec::new();
    for (i, (entry, key, model)) in jobs.into_iter().enumerate() {
        progress(i, total, &format!("{}/{}", entry.id(), model));
        out.push(probe_one(&clients, &entry, key, &model).await);
    }
    progress(total, total, "");
    out
}

/// Aligned table of results.
pub fn render(results: &[ProbeResult], color: bool) -> String {
    // The running Baton's word beside each verdict, when one answered.
    let gateway = results.iter().any(|r| r.gateway.is_some());
    let mut head: Vec<String> = ["TARGET", "KEY", "RESULT", "LATENCY"]
        .map(String::from)
        .to_vec();
    if gateway {
        head.push("BATON NOW".into());
    }
    head.push("DETAIL".into());
    let mut rows: Vec<Vec<String>> = vec![head];
    let now = baton::clock::unix_ms();
    for r in results {
        let detail: String = r
            .reason
            .clone()
            .unwrap_or_default()
            .chars()
            .take(100)
            .collect();
        let mut row = vec![
            format!("{}/{}", r.provider, r.model),
            r.key.clone().unwrap_or_else(|| "-".into()),
            r.class.as_str().to_string(),
            if r.latency_ms > 0 {
                format!("{} ms", r.latency_ms)
            } else {
                "-".into()
            },
        ];
        if gateway {
            row.push(match &r.gateway {
                Some(GatewaySays {
                    state,
                    until_ms: Some(u),
                }) => format!(
                    "{state} for {}",
                    baton::i18n::duration(u - now, baton::i18n::Lang::En)
                ),
                Some(g) => g.state.clone(),
                None => "-".into(),
            });
        }
        row.push(detail);
        rows.push(row);
    }
    let code = |row: usize| match results[row].class {
        Verdict::Ok => "32",
        Verdict::LoginOnly => "36",
        Verdict::NotTested => "90",
        Verdict::Failed(ErrorClass::Rate | ErrorClass::Overloaded) => "33",
        _ => "31",
    };
    super::table::render(
        &rows,
        color.then_some((2, &code as &dyn Fn(usize) -> &'static str)),
    )
}

/// How long a probe's verdict keeps a scope out when the provider stated no reset.
fn default_hold_ms(class: ErrorClass) -> Option<i64> {
    match class {
        ErrorClass::Rate => Some(60_000),
        ErrorClass::Overloaded => Some(30_000),
        ErrorClass::Billing | ErrorClass::Model => Some(3_600_000),
        ErrorClass::Auth => Some(8 * 86_400_000),
        ErrorClass::Request
        | ErrorClass::Transient
        | ErrorClass::ContentPolicy
        | ErrorClass::InvalidOutput => None,
    }
}

/// `--apply`: sends each failed probe's cooldown to a running Baton (`POST /admin/cooldowns`),
/// and each answer's time to its first token to its speed book (`POST /admin/speeds`, what a
/// route ordered by speed and a hedge's p95 go by). Returns how many cooldowns were applied.
pub async fn apply(results: &[ProbeResult], url: &str, admin_key: &str) -> Result<usize, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let now = baton::clock::unix_ms();
    let mut applied = 0;
    for r in results {
        if r.ok() {
            let body = json!({"provider": r.provider, "model": r.model, "ttftMs": r.latency_ms});
            let to = ("speeds", "the speed");
            send(&client, url, admin_key, to, &body, &r.provider).await?;
            continue;
        }
        let Verdict::Failed(class) = r.class else {
            continue;
        };
        let Some(hold) = default_hold_ms(class) else {
            continue;
        };
        let until = r.reset_at_ms.filter(|t| *t > now).unwrap_or(now + hold);
        // Model verdicts apply to the model on every key; the rest to the key.
        let (key, model) = if class == ErrorClass::Model {
            (None, Some(&r.model))
        } else {
            (r.key.as_ref(), None)
        };
        let body = json!({"provider": r.provider, "key": key, "model": model, "untilMs": until,
            "class": class, "reason": format!("probe: {}", r.reason.clone().unwrap_or_default())});
        let to = ("cooldowns", "the cooldown");
        send(&client, url, admin_key, to, &body, &r.provider).await?;
        applied += 1;
    }
    Ok(applied)
}

/// One `POST /admin/{path}` to the running Baton at `url`; `thing` names what it sends, for
/// the error.
async fn send(
    client: &reqwest::Client,
    url: &str,
    admin_key: &str,
    (path, thing): (&str, &str),
    body: &serde_json::Value,
    provider: &str,
) -> Result<(), String> {
    let resp = client
        .post(format!("{}/admin/{path}", url.trim_end_matches('/')))
        .header("x-admin-key", admin_key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach Baton at {url}: {}",
                baton::providers::outbound::describe(&e)
            )
        })?;
    if !resp.status().is_success() {
        return Err(format!(
            "Baton at {url} refused {thing} for {provider}: HTTP {}",
            resp.status().as_u16()
        ));
    }
    Ok(())
}

/// One cheap request (a one-token answer) to one key and model of an HTTP provider.
pub async fn probe_one(
    clients: &providers::HttpClients,
    entry: &providers::ProviderEntry,
    key: Option<usize>,
    model: &str,
) -> ProbeResult {
    let model = model.to_string();
    let api_key = key.and_then(|k| entry.keys.get(k));
    let started = Instant::now();
    let mut result = ProbeResult {
        provider: entry.id().to_string(),
        key: api_key.map(|k| k.id.clone()),
        model: model.clone(),
        class: Verdict::Ok,
        status: None,
        latency_ms: 0,
        reason: None,
        reset_at_ms: None,
        gateway: None,
    };
    if entry.config.kind.is_cli() {
        return probe_cli(entry, result, started).await;
    }
    if !entry.config.credentials.is_baton() {
        result.class = Verdict::LoginOnly;
        result.reason = Some(LOGIN_ONLY.into());
        return result;
    }
    // Nothing to send from here (a key unset in this shell, a bad address): the probe's own
    // finding, not a key the provider rejected.
    if let Some(why) = entry.unavailable() {
        result.class = Verdict::Unavailable;
        result.reason = Some(why);
        return result;
    }
    let rb = match request(clients, entry, key, &model).await {
        Ok(rb) => rb,
        Err((class, reason)) => {
            result.class = class;
            result.reason = Some(reason);
            return result;
        }
    };
    let timeout = Duration::from_millis(entry.config.timeouts.first_byte_ms);
    let classified = send_probe(rb, timeout, entry).await;
    result.latency_ms = started.elapsed().as_millis() as u64;
    if let Some((c, status)) = classified {
        result.class = Verdict::Failed(c.class);
        result.status = status;
        result.reason = Some(c.reason);
        result.reset_at_ms = c.reset_at_ms;
    } else {
        result.status = Some(200);
    }
    result
}

/// The probe's request — the same routing would send, in the provider's own format and
/// auth — or why there is none.
async fn request(
    clients: &providers::HttpClients,
    entry: &providers::ProviderEntry,
    key: Option<usize>,
    model: &str,
) -> Result<reqwest::RequestBuilder, (Verdict, String)> {
    let api_key = key.and_then(|k| entry.keys.get(k));
    let body = json!({"model": model, "max_tokens": 1, "stream": false,
        "messages": [{"role": "user", "content": "ping"}]});
    let not_tested = |why: &str| (Verdict::NotTested, why.to_string());
    let client = clients
        .for_provider(entry)
        .map_err(|_| not_tested("the probe cannot build an HTTP client for it"))?;
    let map = body
        .as_object()
        .ok_or_else(|| not_tested("the probe cannot build its request"))?;
    let canonical = baton::canonical::openai::request_from_openai(map)
        .map_err(|_| not_tested("the probe cannot build its request"))?;
    let openai = map.clone().into();
    let outbound = outbound::Outbound {
        openai: &openai,
        original: None,
        verbatim: None,
        client: None,
        anthropic_beta: None,
        canonical: &canonical,
        stream: false,
        request_id: "probe",
        thinking: outbound::Keep::None,
        now_ms: baton::clock::unix_ms(),
    };
    let target = entry.model_or_default(model);
    outbound::build_signed(&client, entry, &target, api_key, &outbound)
        .await
        .map(|(rb, _)| rb)
        .map_err(|c| (Verdict::Failed(c.class), c.reason))
}

/// Sends the probe and reads its answer: `None` on a 2xx, else the failure classified (with
/// the status when there was one).
async fn send_probe(
    rb: reqwest::RequestBuilder,
    timeout: Duration,
    entry: &providers::ProviderEntry,
) -> Option<(limits::Classified, Option<u16>)> {
    match tokio::time::timeout(timeout, rb.send()).await {
        Err(_) => Some((
            limits::classify_timeout(format!("no response within {} ms", timeout.as_millis())),
            None,
        )),
        Ok(Err(e)) => Some((
            limits::classify_transport(baton::providers::outbound::describe(&e)),
            None,
        )),
        Ok(Ok(resp)) => {
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let bytes = tokio::time::timeout(timeout, resp.bytes())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            if (200..300).contains(&status) {
                None
            } else {
                let ctx = ResetContext {
                    now_ms: baton::clock::unix_ms(),
                    local_tz: jiff::tz::TimeZone::system(),
                    day_reset: entry.day_reset.clone(),
                };
                Some((
                    limits::classify_http(status, &headers, &bytes, &ctx),
                    Some(status),
                ))
            }
        }
    }
}

/// A subscription CLI: its install and login first, then one tiny prompt through it, spawned
/// exactly as routing spawns it.
async fn probe_cli(
    entry: &providers::ProviderEntry,
    mut result: ProbeResult,
    started: Instant,
) -> ProbeResult {
    use baton::providers::cli::{self, run, CliItem};
    let config = entry.config.clone();
    let vars = entry.cli_env.clone();
    let status = tokio::task::spawn_blocking(move || cli::check_status(&config, &vars, 0))
        .await
        .unwrap_or_default();
    if let Some(why) = status.problem {
        result.class = if status.logged_in == Some(false) {
            Verdict::LoggedOut
        } else {
            Verdict::Unavailable
        };
        result.reason = Some(why);
        return result;
    }
    let Some(program) = status.executable else {
        result.class = Verdict::Unavailable;
        return result;
    };
    let kind = entry.config.kind;
    let spec = run::Spawn {
        kind,
        program,
        args: cli::command_args(kind, &result.model, None),
        env: cli::environment(kind, &entry.cli_env, &|k| std::env::var_os(k)),
        stdin: "Reply with the single word: OK".into(),
        ctx: ResetContext {
            now_ms: baton::clock::unix_ms(),
            local_tz: jiff::tz::TimeZone::UTC,
            day_reset: entry.day_reset.clone(),
        },
    };
    let procs = std::sync::Arc::new(run::CliProcesses::default());
    let limit =
        Duration::from_millis(entry.config.timeouts.first_byte_ms + entry.config.timeouts.idle_ms);
    let outcome = match run::start(spec, procs) {
        Err(c) => Err(c),
        Ok(mut call) => tokio::time::timeout(limit, async {
            loop {
                match call.next().await {
                    Some(CliItem::Finish(_)) => return Ok(()),
                    Some(CliItem::Failed(c)) => return Err(c),
                    Some(_) => {}
                    None => {
                        return Err(limits::classify_transport(
                            "the CLI ended without an answer",
                        ))
                    }
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(limits::classify_timeout("no answer in time"))),
    };
    result.latency_ms = started.elapsed().as_millis() as u64;
    if let Err(c) = outcome {
        result.class = Verdict::Failed(c.class);
        result.reason = Some(c.reason);
        result.reset_at_ms = c.reset_at_ms;
    }
    result
}
