//! A command's environment: nothing of ringfence's own (API keys, tokens) reaches it.

use std::path::Path;

/// The search path commands get.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// The environment of a command: `PATH`, `HOME` (the workspace), `LANG`, `TERM=dumb`,
/// `TMPDIR`, then the operator's `extra` variables (which may override none of these but
/// `PATH` and `LANG`).
pub fn clean_env(home: &Path, tmp: &Path, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), PATH.to_owned()),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "dumb".to_owned()),
        ("TMPDIR".to_owned(), tmp.display().to_string()),
    ];
    for (k, v) in extra {
        match k.as_str() {
            "HOME" | "TERM" | "TMPDIR" => continue,
            _ => {}
        }
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v.clone()));
    }
    env
}
