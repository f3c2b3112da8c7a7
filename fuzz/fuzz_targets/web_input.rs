//! What a model or a fetched server controls on the web path: the URL (and every redirect's),
//! robots.txt, and the bytes of a page with its declared charset. Never a panic; a URL the
//! guard passes with an address in it names a public address; robots rules answer for any
//! path; decoding always yields text.
#![no_main]

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use ringfence_net::guard::classify;
use ringfence_net::{AllowList, Guard, Resolve};

/// Every name resolves to loopback: a name the guard lets through must then be refused.
struct Inward;

impl Resolve for Inward {
    fn resolve(&self, _host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // 1. The URL, alone and as a redirect joined onto a page's URL.
    let guard = Guard::with_resolver(AllowList::default(), Box::new(Inward));
    let base = url::Url::parse("https://example.com/a/b?c").unwrap();
    let candidates = [url::Url::parse(&text).ok(), base.join(&text).ok()];
    for url in candidates.into_iter().flatten() {
        if let Ok(target) = guard.check_url(&url) {
            assert!(matches!(url.scheme(), "http" | "https"));
            assert!(url.username().is_empty() && url.password().is_none());
            match target.literal {
                Some(ip) => assert!(classify(ip).is_ok(), "{url} passed as {ip}"),
                None => assert!(guard.resolve_checked(&target.host, target.port).is_err()),
            }
        }
    }
    // 2. robots.txt, and a path from the same bytes.
    let mid = (text.len() / 2..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    let (rules, path) = text.split_at(mid);
    let robots = ringfence_web::robots::Robots::parse(rules, "ringfence");
    let _ = robots.allows(path);
    // 3. A page's bytes with a charset label taken from its first line.
    let label: String = text.lines().next().unwrap_or("").chars().take(40).collect();
    let decoded = ringfence_web::charset::decode(data, Some(&label), true);
    assert!(!decoded.encoding.is_empty());
    let _ = ringfence_web::charset::decode(data, None, data.first() == Some(&b'<'));
});
