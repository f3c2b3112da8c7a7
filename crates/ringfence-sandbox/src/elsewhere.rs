//! Off Linux: the same entry points as the Linux sandbox, each refusing with what
//! [`crate::unsupported`] says. Nothing is run unconfined in their place.

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use crate::{Applied, Helper, Outcome, Policy, SandboxError, Spec, Stream};

fn refusal() -> SandboxError {
    SandboxError::Unsupported(
        crate::unsupported(std::env::consts::OS)
            .unwrap_or_else(|| "no sandbox for this platform in this build".to_owned()),
    )
}

/// Refuses: no command runs on this platform.
pub async fn run<C, F>(
    _helper: &Helper,
    _spec: &Spec,
    _timeout: Duration,
    _cancel: C,
    _output: F,
) -> Result<Outcome, SandboxError>
where
    C: Future<Output = ()>,
    F: FnMut(Stream, &[u8]),
{
    Err(refusal())
}

/// Refuses: nothing can be restricted on this platform.
pub fn restrict_self(_policy: &Policy) -> Result<Applied, SandboxError> {
    Err(refusal())
}

/// Says why on stderr and exits with 2.
pub fn helper_main() -> i32 {
    let _ = writeln!(std::io::stderr(), "{}", refusal());
    2
}
