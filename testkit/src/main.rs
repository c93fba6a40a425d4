//! `fake-upstream`: a fake OpenAI-compatible provider on loopback for the Python end-to-end tests
//! and the benchmark. Prints `listening on http://ADDR` once ready.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use clap::Parser;

#[derive(Parser)]
#[command(about = "Fake OpenAI-compatible upstream for Baton's tests and benchmarks")]
struct Args {
    /// Name used in answers ("NAME: <last user message>").
    #[arg(long, default_value = "fake")]
    name: String,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Behaviour for every request: ok, auto (tool call when tools are offered), 429, 500, 503, 400, 401, reset, hang.
    #[arg(long, default_value = "auto")]
    mode: String,
    /// Anthropic requests must carry exactly this subscription login
    /// (`Authorization: Bearer TOKEN`, as Claude Code sends it), else 401.
    #[arg(long)]
    subscription: Option<String>,
    /// Answers report prompt-cache usage (100 prompt tokens, 80 read from the cache).
    #[arg(long)]
    cache_usage: bool,
    /// Bodies are not checked against the API's contract: for benchmarks, where the fake stands
    /// for the cheapest possible upstream.
    #[arg(long)]
    unchecked: bool,
    /// Azure OpenAI deployments its `/openai/…` routes serve (comma-separated).
    #[arg(long, value_delimiter = ',')]
    azure_deployments: Vec<String>,
    /// AWS Bedrock: the access key its `/model/…` routes take, `ID:SECRET[:SESSION_TOKEN]`.
    #[arg(long)]
    bedrock_keys: Option<String>,
    /// AWS Bedrock: the region signatures must be scoped to.
    #[arg(long, default_value = "us-east-1")]
    bedrock_region: String,
    /// AWS Bedrock: the model ids it serves (comma-separated).
    #[arg(long, value_delimiter = ',')]
    bedrock_models: Vec<String>,
    /// AWS Bedrock: an API key it takes as a bearer token.
    #[arg(long)]
    bedrock_api_key: Option<String>,
    /// Google Vertex AI: `PROJECT:REGION` its `/v1/projects/…` routes serve.
    #[arg(long)]
    vertex: Option<String>,
    /// Google Vertex AI: the service account whose JWTs its `/token` endpoint takes, as
    /// `EMAIL:PUBLIC_KEY_DER_FILE`.
    #[arg(long)]
    vertex_account: Option<String>,
    /// Google Vertex AI: the Anthropic models it serves (comma-separated).
    #[arg(long, value_delimiter = ',')]
    vertex_models: Vec<String>,
    /// Google Vertex AI: an access token it already issued (valid for an hour).
    #[arg(long)]
    vertex_token: Option<String>,
    /// Worker threads for the server.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

fn main() {
    let args = Args::parse();
    let behavior = testkit::behavior_from_name(&args.mode).unwrap_or_else(|| {
        eprintln!("unknown mode {}", args.mode);
        std::process::exit(2);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let fake =
            testkit::FakeUpstream::start_on(&args.name, &format!("{}:{}", args.host, args.port))
                .await;
        fake.always(behavior);
        if let Some(token) = &args.subscription {
            fake.only_subscription(token);
        }
        if args.unchecked {
            fake.unchecked_for_benchmarks();
        }
        if args.cache_usage {
            fake.report_cache_usage();
        }
        let deployments: Vec<&str> = args.azure_deployments.iter().map(String::as_str).collect();
        fake.azure_deployments(&deployments);
        let models: Vec<&str> = args.bedrock_models.iter().map(String::as_str).collect();
        let keys = args.bedrock_keys.clone().unwrap_or_default();
        let mut k = keys.splitn(3, ':');
        let (id, secret, session) = (k.next().unwrap_or(""), k.next().unwrap_or(""), k.next());
        fake.bedrock_account(id, secret, session, &args.bedrock_region, &models);
        if let Some(key) = &args.bedrock_api_key {
            fake.bedrock_api_key(key);
        }
        if let Some(v) = &args.vertex {
            let (project, region) = v.split_once(':').expect("--vertex PROJECT:REGION");
            let (email, der) = match &args.vertex_account {
                Some(a) => {
                    let (email, file) = a.split_once(':').expect("--vertex-account EMAIL:FILE");
                    (
                        email.to_string(),
                        std::fs::read(file).expect("the public key file"),
                    )
                }
                None => (String::new(), Vec::new()),
            };
            let models: Vec<&str> = args.vertex_models.iter().map(String::as_str).collect();
            fake.vertex_account(project, region, &email, &der, &models);
            if let Some(t) = &args.vertex_token {
                fake.vertex_token(t, 3600);
            }
        }
        println!("listening on http://{}", fake.addr);
        let _ = tokio::signal::ctrl_c().await;
    });
}
