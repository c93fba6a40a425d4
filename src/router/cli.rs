//! One attempt at a subscription-CLI target: start the CLI, wait for its first output, and
//! hand its answer on in canonical form, a whole answer or a stream of canonical events,
//! which the API renders in the client's format (no detour through another wire format).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

use super::context::Routing;
use super::snapshot::Target;
use super::stream::source::{CliEvents, Next, Source};
use super::types::{Answer, Attempt, Held, Inbound, Reply, MAX_UPSTREAM_BODY};
use crate::canonical::{ChatResponse, Part, Usage};
use crate::limits::{self, Classified, ErrorClass, ResetContext};
use crate::providers::cli::{self, run, CliItem, CliStatus};

/// How long a CLI's first output may take when the provider leaves `timeouts.firstByteMs` at
/// its default (the program starts, then asks its model).
const CLI_FIRST_OUTPUT_MS: u64 = 120_000;

pub(super) async fn attempt(
    routing: &Routing,
    t: &Target,
    inbound: &Inbound,
    request_id: &str,
) -> Attempt {
    let p = &t.provider;
    let mut run = match spawn(routing, t, inbound, request_id) {
        Ok(run) => run,
        // A request the CLI cannot take is the client's to fix.
        Err(c) => {
            return Attempt::Failed {
                status: (c.class == ErrorClass::Request).then_some(400),
                classified: c,
                body: None,
            }
        }
    };
    // A CLI is a program to start (and log in) before it asks its model anything: unless
    // the provider sets its own, it gets the longer CLI default.
    let first_ms = match p.config.timeouts.first_byte_ms {
        crate::config::DEFAULT_FIRST_BYTE_MS => CLI_FIRST_OUTPUT_MS,
        ms => ms,
    };
    let first_byte = Duration::from_millis(first_ms);
    let mut usage: Option<Usage> = None;
    // Up to the first content: a failure here still fails over.
    let first = loop {
        match timeout(first_byte, run.next()).await {
            Err(_) => {
                return failed(limits::classify_timeout(format!(
                    "the CLI printed no answer within {} ms",
                    first_byte.as_millis()
                )))
            }
            Ok(None) => {
                return failed(limits::classify_transport(
                    "the CLI ended without an answer",
                ))
            }
            Ok(Some(CliItem::Failed(c))) => return cli_failed(routing, p, c),
            Ok(Some(CliItem::Usage(u))) => usage = Some(u),
            Ok(Some(CliItem::Window(w))) => routing.usage_signal(p, "", vec![w]),
            Ok(Some(item)) => break item,
        }
    };
    let enc = Encoder {
        id: format!("chatcmpl-{request_id}"),
        model: t.model.id.clone(),
        created: routing.clock.now_ms() / 1000,
        usage,
    };
    if !inbound.canonical.stream {
        return collect(routing, t, run, first, enc).await;
    }
    stream_out(routing, t, run, first, enc)
}

/// Starts the CLI for `t` (without a shell, in its own process group), or why it cannot.
fn spawn(
    routing: &Routing,
    t: &Target,
    inbound: &Inbound,
    request_id: &str,
) -> Result<run::CliRun, Classified> {
    let p = &t.provider;
    let kind = p.config.kind;
    if let Some(why) = cli::shape_problem(&inbound.canonical, p.config.flatten_history) {
        return Err(Classified {
            class: ErrorClass::Request,
            ..limits::classify_transport(why)
        });
    }
    let program = match p.runtime.cli_status.load_full() {
        Some(st) if st.executable.is_some() => st.executable.clone().unwrap_or_default(),
        _ => {
            let name = p
                .config
                .executable
                .as_deref()
                .or(kind.cli_program())
                .unwrap_or_default();
            cli::resolve_executable(name, std::env::var_os("PATH").as_deref())
                .map_err(limits::classify_transport)?
        }
    };
    let (stdin, system) = cli::stdin_and_system(kind, &inbound.canonical);
    let spec = run::Spawn {
        kind,
        args: cli::command_args(kind, &t.model.id, system.as_deref()),
        env: cli::environment(kind, &p.cli_env, &|k| std::env::var_os(k)),
        program,
        stdin,
        ctx: ResetContext {
            now_ms: routing.clock.now_ms(),
            // The CLI runs with TZ=UTC, so the times it prints are UTC.
            local_tz: jiff::tz::TimeZone::UTC,
            day_reset: p.day_reset.clone(),
        },
    };
    let run = run::start(spec, routing.cli_procs.clone())?;
    tracing::debug!(request_id, provider = p.id(), model = %t.model.id, "CLI started");
    Ok(run)
}

/// The whole answer (non-streamed): the CLI's items from `first` to its finish, as one OpenAI
/// completion.
async fn collect(
    routing: &Routing,
    t: &Target,
    mut run: run::CliRun,
    first: CliItem,
    enc: Encoder,
) -> Attempt {
    let idle = Duration::from_millis(t.provider.config.timeouts.idle_ms);
    let mut usage = enc.usage;
    let mut text = String::new();
    let mut stop = None;
    let mut item = first;
    loop {
        match item {
            CliItem::Text(s) => {
                if text.len() + s.len() > MAX_UPSTREAM_BODY {
                    return failed(limits::classify_transport(
                        "the CLI's answer is larger than Baton accepts",
                    ));
                }
                text.push_str(&s);
            }
            CliItem::Usage(u) => usage = Some(u),
            CliItem::Finish(s) => {
                stop = Some(s);
            }
            CliItem::Failed(c) => return cli_failed(routing, &t.provider, c),
            CliItem::Window(w) => routing.usage_signal(&t.provider, "", vec![w]),
        }
        if stop.is_some() {
            break;
        }
        item = match timeout(idle, run.next()).await {
            Err(_) => {
                return failed(limits::classify_timeout(format!(
                    "the CLI went silent for {} ms",
                    idle.as_millis()
                )))
            }
            Ok(None) => return failed(limits::classify_transport("the CLI stopped mid-answer")),
            Ok(Some(i)) => i,
        };
    }
    let answer = ChatResponse {
        id: enc.id,
        model: enc.model,
        created: enc.created,
        content: vec![Part::Text(text)],
        stop,
        usage,
    };
    Attempt::Served(Answer::Complete(Reply::Canonical(answer), usage, None))
}

/// Streaming: the CLI's items go on as canonical events, which the pump encodes in the
/// client's format; the idle timeout bounds silences, and dropping the stream (client gone)
/// kills the CLI.
fn stream_out(
    routing: &Routing,
    t: &Target,
    run: run::CliRun,
    first: CliItem,
    enc: Encoder,
) -> Attempt {
    let idle = Duration::from_millis(t.provider.config.timeouts.idle_ms);
    let mut events = CliEvents::new(run, idle, routing.redactor.clone());
    let mut prelude = Vec::new();
    // Usage printed before the first content goes first.
    for item in enc.usage.map(CliItem::Usage).into_iter().chain([first]) {
        if let Next::Event(raw, Some(decoded)) = events.item(item) {
            prelude.push(Held { raw, decoded });
        }
    }
    Attempt::Served(Answer::Stream {
        source: Source::Cli(events),
        prelude,
    })
}

/// What the CLI said before its first content, and the answer's identity.
struct Encoder {
    id: String,
    model: String,
    created: i64,
    usage: Option<Usage>,
}

/// A CLI failure; a login problem also marks the provider unavailable until the next check
/// finds it logged in again.
fn cli_failed(
    routing: &Routing,
    p: &crate::providers::ProviderEntry,
    mut c: Classified,
) -> Attempt {
    c.reason = routing.redactor.string(c.reason);
    if c.class == ErrorClass::Auth {
        let program = p.config.kind.cli_program().unwrap_or_default();
        let prev = p.runtime.cli_status.load_full();
        let mut st: CliStatus = prev.as_deref().cloned().unwrap_or_default();
        st.logged_in = Some(false);
        st.problem = Some(format!("not logged in: {}", cli::login_hint(program)));
        p.runtime.cli_status.store(Some(Arc::new(st)));
    }
    failed(c)
}

fn failed(c: Classified) -> Attempt {
    Attempt::Failed {
        classified: c,
        status: None,
        body: None,
    }
}
