//! `serve --http ADDR`: MCP streamable HTTP, one server (and session state) per MCP session,
//! each bound to the user who opened it. What to serve comes resolved in an [`HttpPlan`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use super::{fail, raise_fd_limit, runtime};
use crate::app::App;
use crate::config::HttpPlan;

pub(super) fn run(app: App, addr: &str, tls_files: Option<(PathBuf, PathBuf)>) -> ExitCode {
    serve_at(app, addr, tls_files, None)
}

/// `ringfence ui`: the server on loopback, and a one-time sign-in link for `local` printed
/// (and opened in a browser when `open` and one is found).
pub(super) fn run_ui(app: App, port: u16, open: bool) -> ExitCode {
    serve_at(app, &format!("127.0.0.1:{port}"), None, Some(open))
}

fn serve_at(
    app: App,
    addr: &str,
    tls_files: Option<(PathBuf, PathBuf)>,
    ui: Option<bool>,
) -> ExitCode {
    let addr: SocketAddr = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            return fail(&format!(
                "serve --http {addr}: not a socket address ({e}); use e.g. 127.0.0.1:8765"
            ));
        }
    };
    let plan = match HttpPlan::new(&app.http, addr, tls_files) {
        Ok(p) => p,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    if let Err(e) =
        crate::config::check_client_roots_for_http(app.sessions.client_roots(), &app.http)
    {
        return fail(&format!("configuration error: {e}"));
    }
    raise_fd_limit();
    app.check_roots();
    app.prune_spill();
    let app = Arc::new(app);
    let rt = runtime();
    let result = rt.block_on(serve(&app, addr, &plan, ui));
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    app.shutdown();
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The process's descriptor limit (soft, after [`raise_fd_limit`] raised it), if bounded.
fn descriptor_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    // Windows bounds handles per process far above what a server opens.
    #[cfg(not(unix))]
    {
        None
    }
}

/// Serves until SIGTERM or SIGINT, then lets running calls finish (the plan's grace).
async fn serve(
    app: &Arc<App>,
    addr: SocketAddr,
    plan: &HttpPlan,
    ui: Option<bool>,
) -> Result<(), String> {
    let auth = plan
        .auth()
        .await
        .map_err(|e| format!("configuration error: {e}"))?;
    // Fail closed: anything but loopback would serve every file tool to the network, so
    // it needs authentication.
    if !addr.ip().is_loopback() && auth.is_empty() {
        return Err(format!(
            "serve --http {addr}: binding a non-loopback address requires authentication: add bearer tokens under [http] tokens in the configuration (make a hash with `ringfence token-hash`) or configure [http.oauth], or bind 127.0.0.1"
        ));
    }
    let metrics = Arc::new(ringfence_mcp::Metrics::default());
    let descriptors = descriptor_limit();
    let mut options = plan.options(Arc::new(auth), metrics.clone(), descriptors);
    // With PostgreSQL, any instance serves any request of a session.
    options.shared_sessions = crate::store::sessions(app.store())
        .map_err(|e| format!("the shared session store: {e}"))?;
    let once = ui.map(|_| ringfence_mcp::one_time_token());
    options.settings = Some(ringfence_mcp::SettingsPage {
        sections: app.settings_sections(),
        sessions: crate::store::web_sessions(app.store())
            .map_err(|e| format!("the settings page's sign-ins: {e}"))?,
        session_ttl: std::time::Duration::from_secs(12 * 3600),
        one_time: once.as_deref().map(ringfence_mcp::one_time_key),
        public_origin: plan.public_origin.clone(),
        oauth: match &plan.settings_oauth {
            None => None,
            Some((flow, None)) => Some(flow.clone()),
            Some((flow, Some(var))) => match std::env::var(var) {
                Ok(secret) if !secret.trim().is_empty() => Some(ringfence_mcp::OauthSignIn {
                    client_secret: Some(secret.trim().to_owned()),
                    ..flow.clone()
                }),
                _ => {
                    return Err(format!(
                        "http.oauth.client_secret_env names {var}, which is not set: export the settings page's client secret in it, or remove the key for a public client"
                    ));
                }
            },
        },
    });
    if let Some(reads) =
        crate::store::reads(app.store()).map_err(|e| format!("the shared session store: {e}"))?
    {
        app.sessions.share_reads(reads);
    }
    tracing::info!(
        descriptors = descriptors
            .map(|d| d.to_string())
            .unwrap_or_else(|| "unlimited".into()),
        open_requests = options.max_open_requests,
        "calls and event streams open at once over all users are capped to keep descriptors in reserve"
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("serve --http {addr}: {e}"))?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let factory_app = app.clone();
    let runner = app.runner(
        plan.call_timeout,
        Some(metrics.clone() as Arc<dyn ringfence_core::CallMetrics>),
    );
    let factory = move || Ok(factory_app.user_server(&runner).with_metrics(&metrics));
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        tools = app.toolbox.len(),
        url = %format!("{}://{local}/mcp", plan.scheme),
        "serving MCP over streamable HTTP"
    );
    if let (Some(open), Some(once)) = (ui, &once) {
        let link = format!("{}://{local}/settings/login?once={once}", plan.scheme);
        super::print_out(&format!(
            "Your settings page: {link}\n(the link signs you in once, as `local`; Ctrl-C stops the server)\n"
        ));
        if open {
            open_browser(&link);
        }
    }
    let mut signals = super::stop::StopSignals::listen().map_err(|e| e.to_string())?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let name = signals.recv().await;
        tracing::info!("{name} received; finishing running calls, refusing new ones");
        stop.cancel();
    });
    ringfence_mcp::serve_http(listener, factory, shutdown, options)
        .await
        .map_err(|e| format!("serve --http {addr}: {e}"))
}

/// Opens `link` in the desktop's browser when an opener is found (`xdg-open`, `open`); the
/// printed link is there either way.
fn open_browser(link: &str) {
    for opener in ["xdg-open", "open"] {
        let spawned = std::process::Command::new(opener)
            .arg(link)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = spawned {
            std::thread::spawn(move || child.wait());
            return;
        }
    }
    tracing::info!("no browser opener (xdg-open) found: open the link above yourself");
}
