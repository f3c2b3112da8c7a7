//! The signals that stop a server or the scheduler: SIGTERM and SIGINT on Unix, Ctrl-C
//! (and Ctrl-Break) on Windows. Listened for from the start, so that one sent early is not
//! missed.

/// The stop signals, listened for.
pub(super) struct StopSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(windows)]
    c: tokio::signal::windows::CtrlC,
    #[cfg(windows)]
    brk: tokio::signal::windows::CtrlBreak,
}

impl StopSignals {
    /// Starts listening (inside a runtime).
    pub(super) fn listen() -> std::io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(windows)]
        {
            Ok(StopSignals {
                c: tokio::signal::windows::ctrl_c()?,
                brk: tokio::signal::windows::ctrl_break()?,
            })
        }
    }

    /// Waits for the first stop signal; returns its name.
    pub(super) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(windows)]
        {
            tokio::select! {
                _ = self.c.recv() => "Ctrl-C",
                _ = self.brk.recv() => "Ctrl-Break",
            }
        }
    }
}
