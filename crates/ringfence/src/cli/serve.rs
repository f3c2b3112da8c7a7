//! `serve`: MCP over stdio, for the local user.

use std::process::ExitCode;

use super::{fail, raise_fd_limit, runtime};
use crate::app::App;

pub(super) fn run(app: App) -> ExitCode {
    raise_fd_limit();
    app.check_roots();
    app.prune_spill();
    let server = match app.server() {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        tools = app.toolbox.len(),
        "serving MCP on stdio"
    );
    // SIGTERM and SIGINT end the session like a closed stdin does, so the journal is
    // flushed before the process exits.
    let rt = runtime();
    let result = rt.block_on(async move {
        let mut signals = super::stop::StopSignals::listen()?;
        tokio::select! {
            r = server.serve_stdio() => r,
            name = signals.recv() => {
                tracing::info!("{name} received; shutting down");
                Ok(())
            }
        }
    });
    // A blocking read of stdin may still be in flight (after a signal): do not wait for it.
    rt.shutdown_background();
    app.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("MCP session failed: {e}")),
    }
}
