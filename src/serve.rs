//! Starting the gateway from command-line options, shared by the headless `baton serve` and the
//! desktop app (which also falls back to this when there is no display).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::ConfigFile;

pub use crate::store::LISTEN_SETTING;

/// What `baton serve` and the desktop app take on the command line.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub host: Option<String>,
    pub port: Option<u16>,
}

impl ServeOptions {
    /// The configuration file (or defaults), then the listen address set in Settings (kept in
    /// the data directory), then the command line's overrides; validated.
    pub fn load(&self) -> Result<ConfigFile, String> {
        let mut config = match &self.config {
            Some(path) => crate::config::load_file(path).map_err(|e| e.to_string())?,
            None => ConfigFile::default(),
        };
        if let Some(l) = crate::store::Store::setting_at(&self.data_dir(), LISTEN_SETTING) {
            if let Some(h) = l.get("host").and_then(|v| v.as_str()) {
                config.server.host = h.to_string();
            }
            if let Some(p) = l
                .get("port")
                .and_then(|v| v.as_u64())
                .and_then(|p| u16::try_from(p).ok())
            {
                config.server.port = p;
            }
        }
        if let Some(h) = &self.host {
            config.server.host = h.clone();
        }
        if let Some(p) = self.port {
            config.server.port = p;
        }
        let origin = self
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from("<command line>"));
        crate::config::validate(&config, &origin).map_err(|e| e.to_string())?;
        Ok(config)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(crate::default_data_dir)
    }
}

/// The "key generated" notice and the machine-readable `listening on` line.
pub fn announce(handle: &crate::GatewayHandle, data_dir: &std::path::Path) {
    if let Some(key) = &handle.generated_key {
        eprintln!(
            "\nA gateway key was generated for this machine (shown once; also in {}):\n\n    {key}\n\nPoint clients at http://{}/v1 with this key as their API key.\n",
            data_dir.join(crate::auth::GATEWAY_KEY_FILE).display(),
            handle.addr
        );
    }
    // Machine-readable line for scripts and tests that start Baton on port 0.
    println!("listening on http://{}", handle.addr);
    let admin = data_dir.join(crate::auth::ADMIN_KEY_FILE);
    if admin.exists() {
        eprintln!(
            "Web UI: http://{}/ui/ (unlock it with the admin key in {})",
            handle.addr,
            admin.display()
        );
    } else {
        eprintln!("Web UI: http://{}/ui/", handle.addr);
    }
}

/// Runs the gateway until SIGINT/SIGTERM, then drains and flushes.
pub fn run_headless(args: ServeOptions) -> ExitCode {
    let config = match args.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let data_dir = args.data_dir();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let addr = format!("{}:{}", config.server.host, config.server.port);
        let listener = match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {addr}: {e}. Is another Baton running? Pick another port with --port.");
                return ExitCode::FAILURE;
            }
        };
        let opts = crate::StartOptions { config, data_dir: data_dir.clone(), clock: None };
        let handle = match crate::start(opts, listener).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        let stop = shutdown_signal();
        announce(&handle, &data_dir);
        stop.await;
        tracing::info!("shutting down: finishing in-flight requests");
        handle.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called (not when the
/// future is first polled), so a signal right after start-up is never lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}
