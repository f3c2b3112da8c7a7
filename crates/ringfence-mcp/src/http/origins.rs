//! Which browser origins may send requests (the `Origin` header), against DNS rebinding and
//! cross-site requests: the server's own origins — its loopback names and accepted `Host`
//! names on the port it listens on, and its public URL — and those the operator lists. A
//! request without `Origin` (every native client) is not a browser's and passes; any other
//! origin, `null` included, is refused with 403.

/// An `allowed_origins` entry that is not an origin: the entry and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{entry}` is not an origin ({why}); write scheme, host and optionally a port, as `https://app.example.com`, `http://localhost:3000` or `http://localhost:*`"
)]
pub struct InvalidOrigin {
    pub entry: String,
    pub why: &'static str,
}

/// `entry` as an origin the transport compares against: `scheme://host:port` with the
/// scheme's port filled in when none is given, or `scheme://host:*` for any port.
pub fn normalize_origin(entry: &str) -> Result<String, InvalidOrigin> {
    let entry = entry.trim();
    let (base, any_port) = match entry.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (entry, false),
    };
    let bad = |why: &'static str| {
        Err(InvalidOrigin {
            entry: entry.to_owned(),
            why,
        })
    };
    let Ok(url) = url::Url::parse(base) else {
        return bad("it does not parse as a URL");
    };
    // `Url` drops a port that is the scheme's default: look at the authority as written.
    let authority = base
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .unwrap_or("");
    let host_part = authority.rsplit('@').next().unwrap_or("");
    let written_port = match host_part.rfind(']') {
        Some(end) => host_part[end..].contains(':'),
        None => host_part.contains(':'),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return bad(
            "only http and https origins exist for a browser page that can reach this server",
        );
    }
    let Some(host) = url.host_str() else {
        return bad("it names no host");
    };
    if host.contains('*') {
        return bad("a host is matched as written, so a wildcard matches nothing; list each host");
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return bad("an origin has no path, query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("an origin has no user name or password");
    }
    // `Url` drops a port that is the scheme's default; the transport wants one written.
    if any_port {
        if written_port {
            return bad("a port and `:*` together");
        }
        return Ok(format!("{}://{host}:*", url.scheme()));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    Ok(format!("{}://{host}:{port}", url.scheme()))
}

/// The server's own origins when it listens on `port` with `scheme`: each accepted `Host`
/// name (`hosts`, which may carry a port of their own) as a browser would write it.
pub(super) fn own_origins(scheme: &str, hosts: &[String], port: u16) -> Vec<String> {
    hosts
        .iter()
        .filter_map(|host| {
            let host = host.trim();
            // `::1` as a bare name; `[::1]`, `example.com:8080` as written in a Host header.
            let colons = host.matches(':').count();
            let with_port = if colons > 1 && !host.starts_with('[') {
                format!("{scheme}://[{host}]:{port}") // a bare IPv6 address
            } else if colons == 0 || host.ends_with(']') {
                format!("{scheme}://{host}:{port}")
            } else {
                format!("{scheme}://{host}") // the host's own port
            };
            normalize_origin(&with_port).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_normalized_with_their_port() {
        assert_eq!(
            normalize_origin("https://app.example.com").unwrap(),
            "https://app.example.com:443"
        );
        assert_eq!(
            normalize_origin("http://localhost:3000").unwrap(),
            "http://localhost:3000"
        );
        assert_eq!(
            normalize_origin(" http://LOCALHOST:* ").unwrap(),
            "http://localhost:*"
        );
        assert_eq!(
            normalize_origin("https://app.example.com/").unwrap(),
            "https://app.example.com:443"
        );
        assert_eq!(
            normalize_origin("http://[::1]:8765").unwrap(),
            "http://[::1]:8765"
        );
    }

    #[test]
    fn what_is_not_an_origin_is_refused_with_the_reason() {
        for (entry, why) in [
            ("app.example.com", "does not parse"),
            ("null", "does not parse"),
            ("file:///home", "only http and https"),
            ("https://app.example.com/page", "no path"),
            ("https://a@app.example.com", "no user name"),
            ("https://app.example.com:8443:*", "a port and `:*`"),
            ("https://app.example.com:443:*", "a port and `:*`"),
            ("https://*.example.com", "wildcard"),
            ("*", "does not parse"),
        ] {
            let err = normalize_origin(entry).unwrap_err().to_string();
            assert!(err.contains(why), "{entry}: {err}");
            assert!(err.contains("http://localhost:3000"), "{err}");
        }
    }

    #[test]
    fn own_origins_name_every_host_on_the_port() {
        let hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]", "example.com:9000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            own_origins("http", &hosts, 8765),
            [
                "http://localhost:8765",
                "http://127.0.0.1:8765",
                "http://[::1]:8765",
                "http://[::1]:8765",
                "http://example.com:9000",
            ]
        );
    }
}
