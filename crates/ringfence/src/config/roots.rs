//! Where the tools may reach: the roots (flags, else `RINGFENCE_ROOTS`, else seed 000's
//! `IRIS_WORKSPACE_ROOT`, else the file), the
//! denylist (file, `RINGFENCE_DENYLIST` and flags add up), and what the MCP client's own
//! roots may do.

use std::path::Path;

use ringfence_fs::{Access, ClientRoots, RootSpec};

use super::raw::RootEntry;
use super::{ConfigError, Env, expand_home, list};
use crate::env_vars;

/// The roots from the highest layer that names any; empty means the default workspace.
/// Roots given as flags may be relative (to `cwd`); elsewhere they must be absolute.
pub(super) fn resolve(
    flags: &[String],
    env: &dyn Env,
    file: Option<&[RootEntry]>,
    cwd: &Path,
) -> Result<Vec<RootSpec>, ConfigError> {
    let mut roots = Vec::new();
    if !flags.is_empty() {
        for r in flags {
            roots.push(root_spec(r, env, cwd, "ROOT", true)?);
        }
    } else if let Some(value) = env
        .get(env_vars::RINGFENCE_ROOTS)
        .filter(|s| !s.trim().is_empty())
    {
        for r in split_roots_env(&value, cfg!(windows))? {
            roots.push(root_spec(&r, env, cwd, env_vars::RINGFENCE_ROOTS, false)?);
        }
    } else if let Some(value) = env
        .get(env_vars::IRIS_WORKSPACE_ROOT)
        .filter(|s| !s.trim().is_empty())
    {
        // Seed 000's one workspace root (read-write unless written `…:ro`); like every
        // configured root, one that does not exist is an error on every call, never created.
        roots.push(root_spec(
            value.trim(),
            env,
            cwd,
            env_vars::IRIS_WORKSPACE_ROOT,
            false,
        )?);
    } else if let Some(entries) = file {
        if entries.is_empty() {
            return Err(ConfigError::invalid(
                "roots",
                "the list is empty; remove the key to use the default workspace, or list at least one directory",
            ));
        }
        for (i, entry) in entries.iter().enumerate() {
            let key = format!("roots[{i}]");
            let spec = match entry {
                RootEntry::Short(s) => root_spec(s, env, cwd, &key, false)?,
                RootEntry::Table(t) => {
                    let access = match &t.access {
                        Some(a) => parse_access(a, &format!("{key}.access"))?,
                        None => Access::ReadWrite,
                    };
                    let s = t.path.to_str().ok_or_else(|| {
                        ConfigError::invalid(format!("{key}.path"), "not valid UTF-8")
                    })?;
                    let mut spec = root_spec(s, env, cwd, &format!("{key}.path"), false)?;
                    spec.access = access;
                    spec
                }
            };
            roots.push(spec);
        }
    }
    for (i, a) in roots.iter().enumerate() {
        if roots[..i].iter().any(|b| b.path == a.path) {
            return Err(ConfigError::DuplicateRoot(a.path.clone()));
        }
    }
    Ok(roots)
}

/// The denylist: the file's, then the variable's, then the flags' patterns — they add up
/// (a denylist only narrows). Checked here so a bad pattern stops the start.
pub(super) fn denylist(
    file: Option<&[String]>,
    env: &dyn Env,
    flags: &[String],
) -> Result<Vec<String>, ConfigError> {
    let mut denylist = file.map(<[String]>::to_vec).unwrap_or_default();
    if let Some(v) = env.get(env_vars::RINGFENCE_DENYLIST) {
        denylist.extend(list(&v));
    }
    denylist.extend(flags.iter().cloned());
    ringfence_fs::Denylist::new(&denylist)
        .map_err(|e| ConfigError::invalid("denylist", e.to_string()))?;
    Ok(denylist)
}

/// What the client's MCP roots may do: the flag, else the variable, else the file.
pub(super) fn client_roots(
    flag: Option<&str>,
    env: &dyn Env,
    file: Option<&str>,
) -> Result<ClientRoots, ConfigError> {
    match flag
        .map(str::to_owned)
        .or_else(|| {
            env.get(env_vars::RINGFENCE_CLIENT_ROOTS)
                .filter(|s| !s.trim().is_empty())
        })
        .or_else(|| file.map(str::to_owned))
    {
        Some(v) => ClientRoots::parse(v.trim())
            .map_err(|e| ConfigError::invalid("client_roots", e.to_string())),
        None => Ok(ClientRoots::default()),
    }
}

/// `serve --http` with users (`[http] tokens` or `[http.oauth]`): `extend` and
/// `extend-write` are refused, because a client could then hand its user any directory it
/// names — another user's folder, `/etc` — and over HTTP the client is not the operator.
/// Each user's own directory is a `{user}` root; `narrow` (the default) keeps the client
/// inside it.
pub fn check_client_roots_for_http(
    policy: ClientRoots,
    http: &super::HttpConfig,
) -> Result<(), ConfigError> {
    if !policy.extends() || (http.tokens.is_empty() && http.oauth.is_none()) {
        return Ok(());
    }
    Err(ConfigError::invalid(
        "client_roots",
        format!(
            "`{}` is refused with HTTP users ([http] tokens or [http.oauth]): a user's MCP client could add any directory, another user's included. Use `narrow` (the default) and give each user their own directory with a `{{user}}` root; `extend` is for stdio and unauthenticated loopback HTTP only",
            policy.as_str()
        ),
    ))
}

/// Splits `RINGFENCE_ROOTS`: `:`-separated absolute paths, a `ro`/`rw` token after a path
/// being its access suffix. On Windows (`windows`), where a path holds a `:` after its
/// drive letter, the list is `;`-separated, as `PATH` is there, and each entry keeps its own
/// `:ro`/`:rw` suffix (`C:\notes;D:\src:ro`).
fn split_roots_env(value: &str, windows: bool) -> Result<Vec<String>, ConfigError> {
    if windows {
        return Ok(value
            .split(';')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect());
    }
    let mut out: Vec<String> = Vec::new();
    for token in value.split(':') {
        if token.is_empty() {
            continue;
        }
        if token == "ro" || token == "rw" {
            match out.last_mut() {
                Some(last) => {
                    last.push(':');
                    last.push_str(token);
                }
                None => {
                    return Err(ConfigError::invalid(
                        env_vars::RINGFENCE_ROOTS,
                        format!("`{token}` must follow a path"),
                    ));
                }
            }
        } else {
            out.push(token.to_owned());
        }
    }
    Ok(out)
}

fn parse_access(value: &str, key: &str) -> Result<Access, ConfigError> {
    match value {
        "read" | "ro" | "read-only" => Ok(Access::ReadOnly),
        "write" | "rw" | "read-write" => Ok(Access::ReadWrite),
        other => Err(ConfigError::invalid(
            key,
            format!("access `{other}` is not valid; use `read` or `write`"),
        )),
    }
}

/// Makes a root spec absolute against `cwd` (`~` and `$HOME` expanded first), with a clear
/// error for empty input.
fn root_spec(
    spec: &str,
    env: &dyn Env,
    cwd: &Path,
    key: &str,
    allow_relative: bool,
) -> Result<RootSpec, ConfigError> {
    let spec = &expand_home(spec, env, key)?;
    let mut rs = RootSpec::parse_cli(spec).map_err(|e| ConfigError::invalid(key, e.to_string()))?;
    if !rs.path.is_absolute() {
        if !allow_relative {
            return Err(ConfigError::invalid(
                key,
                format!("root `{spec}` must be an absolute path"),
            ));
        }
        rs.path = cwd.join(&rs.path);
        rs.label = ringfence_fs::normalize_lexically(&rs.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into());
    }
    rs.path = ringfence_fs::normalize_lexically(&rs.path);
    Ok(rs)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::tests::env;
    use crate::config::{Config, Overrides};

    #[test]
    fn the_roots_variable_splits_on_colons_and_on_windows_on_semicolons() {
        let unix = super::split_roots_env("/a:/b:ro::/c:rw", false).unwrap();
        assert_eq!(unix, ["/a", "/b:ro", "/c:rw"]);
        assert!(super::split_roots_env("ro:/a", false).is_err());
        // A drive letter's colon is part of the path; each entry keeps its suffix.
        let windows = super::split_roots_env(r"C:\notes; D:\src:ro;;", true).unwrap();
        assert_eq!(windows, [r"C:\notes", r"D:\src:ro"]);
    }

    #[test]
    fn env_roots_must_be_absolute_and_unique() {
        let e = env(&[("HOME", "/h"), ("RINGFENCE_ROOTS", "relative")]);
        assert!(
            Config::load(&Overrides::default(), &e, Path::new("/cwd"))
                .unwrap_err()
                .to_string()
                .contains("absolute")
        );
        let e = env(&[("HOME", "/h"), ("RINGFENCE_ROOTS", "/a:/a/")]);
        assert!(
            Config::load(&Overrides::default(), &e, Path::new("/cwd"))
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn client_roots_extension_is_refused_with_http_users() {
        use super::check_client_roots_for_http;
        use crate::config::tests::load_file;
        let tokens = "[http]\ntokens = [{ user = \"alice\", hash = \"blake3:0000000000000000000000000000000000000000000000000000000000000000\" }]\n";
        for (policy, users, refused) in [
            ("extend", tokens, true),
            ("extend-write", tokens, true),
            ("narrow", tokens, false),
            ("ignore", tokens, false),
            ("extend", "", false),
            ("extend-write", "", false),
        ] {
            let config = load_file(
                &format!("client_roots = \"{policy}\"\n{users}"),
                &[("HOME", "/h")],
            )
            .unwrap();
            let result = check_client_roots_for_http(config.client_roots, &config.http);
            assert_eq!(
                result.is_err(),
                refused,
                "{policy} with users: {}",
                !users.is_empty()
            );
            if let Err(e) = result {
                let msg = e.to_string();
                assert!(msg.starts_with("client_roots: "), "{msg}");
                assert!(msg.contains(policy) && msg.contains("narrow"), "{msg}");
            }
        }
    }

    #[test]
    fn bad_denylist_pattern_fails_closed() {
        let e = env(&[("HOME", "/h"), ("RINGFENCE_DENYLIST", "!keep")]);
        let err = Config::load(&Overrides::default(), &e, Path::new("/cwd")).unwrap_err();
        assert!(err.to_string().contains("negation"), "{err}");
    }
}
