//! The SSRF guard: whether an address that came from a model (or from content it fetched)
//! may be reached. A URL is parsed with the WHATWG parser (so `2130706433`, `0x7f.1` and
//! `0177.0.0.1` are the address they spell) and checked ([`Guard::check_url`]); a host name is
//! resolved once, by the guard acting as the HTTP client's resolver ([`GuardedResolver`]),
//! and every address it answers is checked before the client connects to those addresses —
//! there is no second lookup to rebind. Redirects are the caller's to follow hop by hop, each
//! hop through the same checks. [`Guard::vet`] does both steps at once for a caller that
//! connects by itself.
//!
//! Refused: every scheme but http and https, URLs with credentials, and any address that is
//! loopback, private (RFC 1918), shared (100.64/10), link-local (169.254/16 with the cloud
//! metadata address, fe80::/10), unique-local (fc00::/7), unspecified, multicast, broadcast,
//! reserved, documentation or benchmarking space, or an IPv4-mapped, IPv4-compatible, NAT64,
//! 6to4 or Teredo form of one — unless the operator allowed it (`[web] allow_private`, which
//! nothing the model sends can widen).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why an address may not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    Loopback,
    Private,
    Shared,
    LinkLocal,
    UniqueLocal,
    Unspecified,
    Multicast,
    Broadcast,
    Reserved,
    Documentation,
    Benchmarking,
}

impl Blocked {
    /// The kind of address, in words ("a loopback address").
    pub fn describe(self) -> &'static str {
        match self {
            Blocked::Loopback => "a loopback address",
            Blocked::Private => "a private-network address (RFC 1918)",
            Blocked::Shared => "a shared carrier address (100.64.0.0/10)",
            Blocked::LinkLocal => "a link-local address (cloud metadata lives there)",
            Blocked::UniqueLocal => "a unique-local IPv6 address (fc00::/7)",
            Blocked::Unspecified => "the unspecified address",
            Blocked::Multicast => "a multicast address",
            Blocked::Broadcast => "the broadcast address",
            Blocked::Reserved => "a reserved address",
            Blocked::Documentation => "a documentation address",
            Blocked::Benchmarking => "a benchmarking address (198.18.0.0/15)",
        }
    }
}

/// Whether `ip` is an address of the public internet; if not, why.
pub fn classify(ip: IpAddr) -> Result<(), Blocked> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), Blocked> {
    const TABLE: &[([u8; 4], u32, Blocked)] = &[
        ([0, 0, 0, 0], 8, Blocked::Unspecified),
        ([10, 0, 0, 0], 8, Blocked::Private),
        ([100, 64, 0, 0], 10, Blocked::Shared),
        ([127, 0, 0, 0], 8, Blocked::Loopback),
        ([169, 254, 0, 0], 16, Blocked::LinkLocal),
        ([172, 16, 0, 0], 12, Blocked::Private),
        ([192, 0, 0, 0], 24, Blocked::Reserved),
        ([192, 0, 2, 0], 24, Blocked::Documentation),
        ([192, 88, 99, 0], 24, Blocked::Reserved),
        ([192, 168, 0, 0], 16, Blocked::Private),
        ([198, 18, 0, 0], 15, Blocked::Benchmarking),
        ([198, 51, 100, 0], 24, Blocked::Documentation),
        ([203, 0, 113, 0], 24, Blocked::Documentation),
        ([224, 0, 0, 0], 4, Blocked::Multicast),
        ([255, 255, 255, 255], 32, Blocked::Broadcast),
        ([240, 0, 0, 0], 4, Blocked::Reserved),
    ];
    match TABLE.iter().find(|(net, bits, _)| in_v4(ip, *net, *bits)) {
        Some((_, _, why)) => Err(*why),
        None => Ok(()),
    }
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), Blocked> {
    let seg = ip.segments();
    let octets = ip.octets();
    let v4_at = |i: usize| Ipv4Addr::new(octets[i], octets[i + 1], octets[i + 2], octets[i + 3]);
    if ip.is_unspecified() {
        return Err(Blocked::Unspecified);
    }
    if ip.is_loopback() {
        return Err(Blocked::Loopback);
    }
    // Forms that carry an IPv4 address: judged by the address they carry.
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
    if seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0) {
        return classify_v4(v4_at(12));
    }
    // NAT64: 64:ff9b::/96 and the local-use 64:ff9b:1::/48.
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(v4_at(12));
    }
    if seg[..3] == [0x64, 0xff9b, 1] {
        return Err(Blocked::Reserved);
    }
    // 6to4 (2002::/16) carries the IPv4 address in bits 16..48.
    if seg[0] == 0x2002 {
        return classify_v4(v4_at(2));
    }
    // Teredo (2001::/32): the client's address, inverted, in the last 32 bits; the server's
    // in bits 32..64. Either may point inside.
    if seg[0] == 0x2001 && seg[1] == 0 {
        let client = !u32::from(v4_at(12));
        classify_v4(v4_at(4))?;
        return classify_v4(Ipv4Addr::from(client));
    }
    match seg[0] {
        s if s & 0xfe00 == 0xfc00 => Err(Blocked::UniqueLocal),
        s if s & 0xffc0 == 0xfe80 => Err(Blocked::LinkLocal),
        // Deprecated site-local fec0::/10.
        s if s & 0xffc0 == 0xfec0 => Err(Blocked::Reserved),
        s if s & 0xff00 == 0xff00 => Err(Blocked::Multicast),
        // Documentation 2001:db8::/32 and 3fff::/20.
        0x2001 if seg[1] == 0x0db8 => Err(Blocked::Documentation),
        0x3fff if seg[1] & 0xf000 == 0 => Err(Blocked::Documentation),
        // Benchmarking 2001:2::/48; ORCHIDs and other IETF protocol space 2001::/23.
        0x2001 if seg[1] == 0x0002 && seg[2] == 0 => Err(Blocked::Benchmarking),
        0x2001 if seg[1] < 0x0200 => Err(Blocked::Reserved),
        // Discard-only 100::/64.
        0x0100 if seg[1..4] == [0, 0, 0] => Err(Blocked::Reserved),
        // Only global unicast (2000::/3) is public.
        s if s & 0xe000 != 0x2000 => Err(Blocked::Reserved),
        _ => Ok(()),
    }
}

/// What the operator allows besides the public internet (`[web] allow_private`): networks,
/// single addresses and host names. Built from configuration only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    nets: Vec<(IpAddr, u32)>,
    hosts: Vec<String>,
}

/// An `allow_private` entry that is neither a network, an address nor a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{entry}` is not a network (10.1.2.0/24), an address or a host name: {why}")]
pub struct AllowListError {
    pub entry: String,
    pub why: &'static str,
}

impl AllowList {
    /// Parses the entries (CIDRs, addresses, host names); errors name the entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowList, AllowListError> {
        let mut list = AllowList::default();
        for entry in entries {
            let raw = entry.as_ref().trim();
            let bad = |why| AllowListError {
                entry: raw.to_owned(),
                why,
            };
            if raw.is_empty() {
                return Err(bad("it is empty"));
            }
            if let Some((addr, bits)) = raw.split_once('/') {
                let ip: IpAddr = addr.parse().map_err(|_| bad("the address is not valid"))?;
                let bits: u32 = bits
                    .parse()
                    .map_err(|_| bad("the prefix length is not a number"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                if bits > max {
                    return Err(bad("the prefix length is too long"));
                }
                list.nets.push((ip, bits));
            } else if let Ok(ip) = raw.trim_matches(['[', ']']).parse::<IpAddr>() {
                list.nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                let host = raw.trim_end_matches('.').to_ascii_lowercase();
                let valid = host.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
                if !valid {
                    return Err(bad("a host name has letters, digits, `-` and dots"));
                }
                list.hosts.push(host);
            }
        }
        Ok(list)
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.hosts.is_empty()
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|&(net, bits)| match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => in_v4(a, n.octets(), bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - bits)
                };
                u128::from(a) & mask == u128::from(n) & mask
            }
            _ => false,
        })
    }
}

/// Resolves a host name (injectable, so tests can answer as a rebinding server would).
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver (`getaddrinfo`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs;
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// A URL cleared for one request: connect to `addrs` (and only them), sending `host` in the
/// Host header and as the TLS server name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vetted {
    pub url: url::Url,
    /// The host as the URL names it (a name, or an address).
    pub host: String,
    pub port: u16,
    /// Every address the name resolved to; each passed the check.
    pub addrs: Vec<SocketAddr>,
}

/// Why a URL may not be fetched. Its message is written for the model, and names the
/// operator's setting where one exists.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GuardError {
    #[error("`{url}` is not a valid URL: {why}")]
    Invalid { url: String, why: String },
    #[error("refused: only http and https URLs can be fetched, not `{scheme}:`")]
    Scheme { scheme: String },
    #[error(
        "refused: URLs with a user name or password are not fetched; leave the credentials out"
    )]
    Credentials,
    #[error("cannot resolve {host}: {why}; check the host name")]
    NoAddress { host: String, why: String },
    #[error(
        "refused: {host} is {}{}; an operator can allow it with [web] allow_private",
        why.describe(),
        resolved.map(|a| format!(" ({a})")).unwrap_or_default()
    )]
    Blocked {
        host: String,
        /// The address that was refused, when the host is a name.
        resolved: Option<IpAddr>,
        why: Blocked,
    },
}

/// Decides, for URLs a model sent or fetched content pointed at, whether they may be reached.
pub struct Guard {
    allow: AllowList,
    resolver: Box<dyn Resolve>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("allow", &self.allow).finish()
    }
}

impl Guard {
    pub fn new(allow: AllowList) -> Guard {
        Guard::with_resolver(allow, Box::new(SystemResolver))
    }

    pub fn with_resolver(allow: AllowList, resolver: Box<dyn Resolve>) -> Guard {
        Guard { allow, resolver }
    }

    /// Parses `url`, resolves its host once and checks every address. (Blocking: resolution
    /// may wait on DNS; call it off the async runtime.)
    pub fn vet(&self, url: &str) -> Result<Vetted, GuardError> {
        let parsed = url::Url::parse(url.trim()).map_err(|e| GuardError::Invalid {
            url: url.to_owned(),
            why: e.to_string(),
        })?;
        self.vet_url(parsed)
    }

    /// [`vet`](Self::vet) for a URL already parsed (a redirect's `Location`, joined onto the
    /// URL it came from).
    pub fn vet_url(&self, url: url::Url) -> Result<Vetted, GuardError> {
        let target = self.check_url(&url)?;
        let addrs = match target.literal {
            Some(ip) => vec![SocketAddr::new(ip, target.port)],
            None => self.resolve_checked(&target.host, target.port)?,
        };
        Ok(Vetted {
            url,
            host: target.host,
            port: target.port,
            addrs,
        })
    }

    /// The checks that need no resolution: the scheme, credentials, and — when the host is
    /// an address, however spelled — the address itself. A host name is checked when it is
    /// resolved ([`resolve_checked`](Self::resolve_checked), which the guarded client's
    /// resolver calls), so it is resolved exactly once, by what connects.
    pub fn check_url(&self, url: &url::Url) -> Result<Target, GuardError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(GuardError::Scheme {
                scheme: url.scheme().to_owned(),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(GuardError::Credentials);
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let (host, literal) = match url.host() {
            Some(url::Host::Ipv4(v4)) => (v4.to_string(), Some(IpAddr::V4(v4))),
            Some(url::Host::Ipv6(v6)) => (v6.to_string(), Some(IpAddr::V6(v6))),
            Some(url::Host::Domain(d)) => (d.to_owned(), None),
            None => {
                return Err(GuardError::Invalid {
                    url: url.to_string(),
                    why: "it names no host".into(),
                });
            }
        };
        if let Some(ip) = literal {
            self.check_addrs(&host, false, &[SocketAddr::new(ip, port)])?;
        }
        Ok(Target {
            host,
            port,
            literal,
        })
    }

    /// Resolves `host` once and checks every address it answered.
    pub fn resolve_checked(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, GuardError> {
        let addrs = self
            .resolver
            .resolve(host.trim_end_matches('.'), port)
            .map_err(|e| GuardError::NoAddress {
                host: host.to_owned(),
                why: e.to_string(),
            })?;
        if addrs.is_empty() {
            return Err(GuardError::NoAddress {
                host: host.to_owned(),
                why: "the name resolved to nothing".into(),
            });
        }
        self.check_addrs(host, true, &addrs)?;
        Ok(addrs)
    }

    /// Resolves `host` without checking the answers: only for a host the operator configured
    /// (the proxy).
    pub fn resolve_unchecked(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, GuardError> {
        self.resolver
            .resolve(host.trim_end_matches('.'), port)
            .map_err(|e| GuardError::NoAddress {
                host: host.to_owned(),
                why: e.to_string(),
            })
    }

    /// Every address must pass: a name answering one public and one private address is
    /// refused (the connection could land on either).
    fn check_addrs(&self, host: &str, named: bool, addrs: &[SocketAddr]) -> Result<(), GuardError> {
        let host_allowed = named && self.allow.allows_host(host);
        for addr in addrs {
            let ip = addr.ip();
            if let Err(why) = classify(ip)
                && !host_allowed
                && !self.allow.allows_ip(ip)
            {
                return Err(GuardError::Blocked {
                    host: host.to_owned(),
                    resolved: named.then_some(ip),
                    why,
                });
            }
        }
        Ok(())
    }
}

/// What [`Guard::check_url`] found in a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host as the URL names it (a name, or an address).
    pub host: String,
    pub port: u16,
    /// The address, when the host is one (already checked).
    pub literal: Option<IpAddr>,
}

/// The guard as a resolver for the HTTP client: every name the client connects to is
/// resolved here, once, and refused unless every address passes — so the client connects
/// only to checked addresses, and a second answer (DNS rebinding) is checked as the first
/// was. Addresses written in a URL never reach a resolver: [`Guard::check_url`] checks them.
/// The second field is the configured proxy's host, which is resolved without a check (the
/// operator chose it; the model cannot name it as a target through this resolver, because
/// with a proxy every target goes to the proxy).
#[derive(Debug, Clone)]
pub struct GuardedResolver(pub std::sync::Arc<Guard>, pub Option<String>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        let host = name.as_str().to_owned();
        let trusted = self
            .1
            .as_deref()
            .is_some_and(|p| p.eq_ignore_ascii_case(host.trim_end_matches('.')));
        Box::pin(async move {
            // getaddrinfo blocks; the port is the connector's to set.
            let addrs = tokio::task::spawn_blocking(move || {
                if trusted {
                    guard.resolve_unchecked(&host, 0)
                } else {
                    guard.resolve_checked(&host, 0)
                }
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The guard's refusal inside an error from the HTTP client, if that is why it failed.
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a GuardError> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(g) = e.downcast_ref::<GuardError>() {
            return Some(g);
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resolver answering from a table (and counting how often it was asked).
    struct Table(
        Vec<(&'static str, Vec<IpAddr>)>,
        std::sync::atomic::AtomicUsize,
    );

    impl Resolve for Table {
        fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.0
                .iter()
                .find(|(h, _)| *h == host)
                .map(|(_, ips)| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))
        }
    }

    fn guard(allow: &[&str]) -> Guard {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        Guard::with_resolver(
            AllowList::parse(allow).unwrap(),
            Box::new(Table(
                vec![
                    ("example.com", vec![ip("93.184.215.14")]),
                    (
                        "v6.example.com",
                        vec![ip("2606:2800:21f:cb07:6820:80da:af6b:8b2c")],
                    ),
                    ("localhost.example", vec![ip("127.0.0.1")]),
                    ("mixed.example", vec![ip("93.184.215.14"), ip("10.0.0.5")]),
                    ("metadata.example", vec![ip("169.254.169.254")]),
                    ("mapped.example", vec![ip("::ffff:192.168.1.1")]),
                    ("wiki.internal", vec![ip("10.1.2.3")]),
                    ("empty.example", vec![]),
                ],
                Default::default(),
            )),
        )
    }

    #[test]
    fn every_spelling_of_an_inside_address_is_refused() {
        let g = guard(&[]);
        let refused = [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://017700000001/",
            "http://127.000.000.001/",
            "http://0/",
            "http://0.0.0.0:8080/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:7f00:1::]/",
            "http://[2002:c0a8:101::1]/",
            "http://[fe80::1]/",
            "http://[fc00::1]/",
            "http://[fd12:3456::1]/",
            "http://[ff02::1]/",
            "http://[2001:db8::1]/",
            "http://10.0.0.1/",
            "http://172.16.5.4/",
            "http://172.31.255.255/",
            "http://192.168.0.1/",
            "http://100.64.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:169.254.169.254]/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://240.0.0.1/",
            "http://192.0.2.1/",
            "http://198.51.100.7/",
            "http://203.0.113.9/",
            "http://198.18.0.1/",
            "http://192.0.0.8/",
            "http://localhost.example/",
            "http://LOCALHOST.EXAMPLE./",
            "http://mixed.example/",
            "http://metadata.example/",
            "http://mapped.example/",
            "https://wiki.internal/",
        ];
        for url in refused {
            match g.vet(url) {
                Err(GuardError::Blocked { .. }) => {}
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn other_schemes_credentials_and_nameless_hosts_are_refused() {
        let g = guard(&[]);
        for (url, expect) in [
            ("file:///etc/passwd", "file:"),
            ("gopher://example.com/", "gopher:"),
            ("ftp://example.com/", "ftp:"),
            ("data:text/plain,hi", "data:"),
            ("javascript:alert(1)", "javascript:"),
            ("http://user:pw@example.com/", "user name or password"),
            ("http://user@example.com/", "user name or password"),
            ("http://example.com@127.0.0.1/", "user name or password"),
            ("http://nowhere.example/", "cannot resolve"),
            ("http://empty.example/", "resolved to nothing"),
            ("not a url", "not a valid URL"),
            ("http://[::1/", "not a valid URL"),
        ] {
            let err = g.vet(url).unwrap_err().to_string();
            assert!(err.contains(expect), "{url}: {err}");
        }
    }

    #[test]
    fn public_addresses_pass_and_are_the_ones_to_connect_to() {
        let g = guard(&[]);
        let v = g.vet("https://example.com/page?q=1").unwrap();
        assert_eq!(v.host, "example.com");
        assert_eq!(v.port, 443);
        assert_eq!(v.addrs, vec!["93.184.215.14:443".parse().unwrap()]);
        let v = g.vet("http://v6.example.com:8080/").unwrap();
        assert_eq!(v.addrs[0].port(), 8080);
        assert!(g.vet("http://8.8.8.8/").is_ok());
        assert!(g.vet("http://[2606:4700:4700::1111]/").is_ok());
        assert!(g.vet("http://172.32.0.1/").is_ok());
        assert!(g.vet("http://100.128.0.1/").is_ok());
    }

    #[test]
    fn the_name_is_resolved_once_per_vetting() {
        let table = Table(
            vec![("example.com", vec!["93.184.215.14".parse().unwrap()])],
            Default::default(),
        );
        let count = std::sync::Arc::new(table);
        struct Shared(std::sync::Arc<Table>);
        impl Resolve for Shared {
            fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
                self.0.resolve(host, port)
            }
        }
        let g = Guard::with_resolver(AllowList::default(), Box::new(Shared(count.clone())));
        g.vet("https://example.com/").unwrap();
        assert_eq!(count.1.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_operator_may_allow_networks_addresses_and_names() {
        let g = guard(&["10.1.2.0/24", "192.168.7.7", "[fd00::1]", "Wiki.Internal."]);
        assert!(g.vet("https://wiki.internal/").is_ok());
        assert!(g.vet("http://10.1.2.200/").is_ok());
        assert!(g.vet("http://192.168.7.7/").is_ok());
        assert!(g.vet("http://[fd00::1]/").is_ok());
        assert!(g.vet("http://10.1.3.1/").is_err());
        assert!(g.vet("http://192.168.7.8/").is_err());
        assert!(g.vet("http://127.0.0.1/").is_err());
        // A name allowed does not allow its address under another name.
        assert!(g.vet("http://10.1.2.3/").is_ok()); // by the network
        let g = guard(&["wiki.internal"]);
        assert!(g.vet("http://10.1.2.3/").is_err());
        let err = guard(&[]).vet("http://127.0.0.1/").unwrap_err().to_string();
        assert_eq!(
            err,
            "refused: 127.0.0.1 is a loopback address; an operator can allow it with [web] allow_private"
        );
        let err = guard(&[])
            .vet("http://metadata.example/")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("metadata.example is a link-local address"),
            "{err}"
        );
        assert!(err.contains("(169.254.169.254)"), "{err}");
    }

    #[test]
    fn allow_list_entries_are_checked() {
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.0/x",
            "nota/24",
            "bad host",
            "a..b",
            "x_y.z",
        ] {
            let err = AllowList::parse(&[bad]).unwrap_err();
            assert_eq!(err.entry, bad.trim());
        }
        assert!(AllowList::parse(&["fd00::/8", "10.0.0.0/8", "intranet"]).is_ok());
    }

    #[test]
    fn teredo_and_nat64_carry_their_ipv4_verdict() {
        // Teredo with server 65.54.227.120 and client 127.0.0.1 (inverted: 80ff:fffe).
        assert_eq!(
            classify("2001:0:4136:e378:8000:63bf:80ff:fffe".parse().unwrap()),
            Err(Blocked::Loopback)
        );
        assert_eq!(classify("64:ff9b::8.8.8.8".parse().unwrap()), Ok(()));
        assert_eq!(
            classify("64:ff9b::10.0.0.1".parse().unwrap()),
            Err(Blocked::Private)
        );
        // Documentation space is exactly 3fff::/20.
        assert_eq!(
            classify("3fff:0fff::1".parse().unwrap()),
            Err(Blocked::Documentation)
        );
        assert_eq!(classify("3fff:1000::1".parse().unwrap()), Ok(()));
    }
}
