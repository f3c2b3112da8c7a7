//! The one way ringfence reaches other servers over HTTP.
//!
//! Every outbound client is made here, so every request says who sends it (a User-Agent
//! naming ringfence), gives up on time (a connect timeout and an overall one), speaks TLS
//! through rustls with the `ring` provider the rest of ringfence uses, and never follows a
//! redirect behind its caller's back: a caller that follows one does so hop by hop, so each
//! hop can be checked. Today the OAuth key-set fetch uses it. The web, image, calendar and
//! delivery families will reach the network only through it, and through the SSRF guard
//! ([`guard`]) — which decides, for every request whose address comes from a model or from
//! content it fetched, whether that address may be reached, resolving it once so the caller
//! connects to what was checked (docs/design/web.md).

pub mod api;
#[cfg(feature = "fake-api")]
pub mod fake_api;
pub mod guard;
pub mod pkce;
mod remote;
pub mod service;

pub use api::{Api, ApiFailure, ApiKey, Reply, RetryPolicy, api_message, human_secs};
pub use remote::{WebError, WebErrorKind};

pub use guard::{
    AllowList, AllowListError, Blocked, Guard, GuardError, GuardedResolver, Resolve,
    SystemResolver, Target, Vetted, refusal_in,
};

use std::time::Duration;

/// How an outbound client behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// Longest wait for a connection (default 10 s).
    pub connect_timeout: Duration,
    /// Longest wait for a whole request, body included (default 30 s).
    pub timeout: Duration,
}

impl Default for Outbound {
    fn default() -> Outbound {
        Outbound {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
        }
    }
}

/// A client could not be made (the TLS backend failed to start).
#[derive(Debug, thiserror::Error)]
#[error("cannot make an HTTP client: {0}")]
pub struct ClientError(#[source] reqwest::Error);

/// `Retry-After` as a wait: delta seconds (fractions allowed, at most a day) or an HTTP date
/// (a date in the past is no wait); `None` when absent or unreadable.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(86_400.0)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// An error and its causes, `: `-separated, each cause once (reqwest's own message is often
/// only "error sending request").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// What ringfence calls itself on the network: `ringfence/<version>`.
pub fn user_agent() -> String {
    format!("ringfence/{}", env!("CARGO_PKG_VERSION"))
}

/// An HTTP client configured as `outbound` says, for endpoints an operator configured (a
/// key set, a search or images API). They are trusted as configured, so the environment's
/// proxy variables (`HTTPS_PROXY`, `NO_PROXY`, …) apply to them as to any program.
pub fn client(outbound: &Outbound) -> Result<reqwest::Client, ClientError> {
    builder(outbound).build().map_err(ClientError)
}

/// An HTTP client for addresses that came from a model or from fetched content: every host
/// name it connects to is resolved once by `guard` and refused unless every address passes
/// (an address written in the URL is the caller's to check first, with
/// [`Guard::check_url`], as is every redirect hop). The environment's proxy variables are
/// ignored. With `proxy` (an http or https proxy the operator configured), every request goes
/// through it: the client then resolves only the proxy's own host (trusted as configured,
/// never checked), and the proxy resolves the targets — so the caller must check a target's
/// name itself before sending ([`Guard::resolve_checked`]), and a name that answers the proxy
/// differently (rebinding) is beyond the guard's sight.
pub fn guarded_client(
    outbound: &Outbound,
    guard: std::sync::Arc<Guard>,
    proxy: Option<&str>,
) -> Result<reqwest::Client, ClientError> {
    let mut resolver = GuardedResolver(guard, None);
    let mut b = builder(outbound).no_proxy();
    if let Some(proxy) = proxy {
        b = b.proxy(reqwest::Proxy::all(proxy).map_err(ClientError)?);
        resolver.1 = url::Url::parse(proxy).ok().and_then(|u| {
            u.host_str()
                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
        });
    }
    b.dns_resolver(resolver).build().map_err(ClientError)
}

fn builder(outbound: &Outbound) -> reqwest::ClientBuilder {
    // The process-wide TLS provider: ring, as for ringfence's own HTTPS server. Installing
    // it twice is harmless (the second attempt reports the first and is ignored).
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(user_agent())
        .connect_timeout(outbound.connect_timeout)
        .timeout(outbound.timeout)
        .redirect(reqwest::redirect::Policy::none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after", "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert("retry-after", "1e9".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(86_400)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        for bad in ["later", "-1", "NaN"] {
            h.insert("retry-after", bad.parse().unwrap());
            assert_eq!(retry_after(&h), None, "{bad}");
        }
    }

    #[test]
    fn an_error_chain_names_each_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "error sending request",
            Some(Box::new(E(
                "connection refused",
                Some(Box::new(E("refused", None))),
            ))),
        );
        assert_eq!(error_chain(&e), "error sending request: connection refused");
    }

    /// A one-request HTTP server on loopback that answers `reply` (or nothing, when it is
    /// `None`) and hands back the request head it read.
    async fn serve_once(reply: Option<&'static str>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            match reply {
                Some(r) => conn.write_all(r.as_bytes()).await.unwrap(),
                None => tokio::time::sleep(Duration::from_secs(5)).await,
            }
            String::from_utf8_lossy(&head).into_owned()
        });
        (url, task)
    }

    #[tokio::test]
    async fn names_ringfence_and_leaves_redirects_to_the_caller() {
        let (url, server) = serve_once(Some(
            "HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ))
        .await;
        let resp = client(&Outbound::default())
            .unwrap()
            .get(&url)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 302, "the redirect was followed");
        assert_eq!(
            resp.headers()["location"],
            "http://169.254.169.254/latest/meta-data/"
        );
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(
            head.contains(&format!("user-agent: {}", user_agent())),
            "{head}"
        );
    }

    #[tokio::test]
    async fn gives_up_on_a_server_that_never_answers() {
        let (url, _server) = serve_once(None).await;
        let outbound = Outbound {
            timeout: Duration::from_millis(200),
            ..Outbound::default()
        };
        let started = std::time::Instant::now();
        let err = client(&outbound)
            .unwrap()
            .get(&url)
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
