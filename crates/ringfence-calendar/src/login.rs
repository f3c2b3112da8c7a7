//! A person's own CalDAV login, entered on the settings page: the server's URL, a username
//! and a password, checked before anything is kept (the form's fields, then where the URL
//! leads), and kept for that person alone where Google connections are kept (a 0600 file of
//! the data directory, or the shared store's credentials with PostgreSQL), under the kind
//! [`KIND`].
//!
//! The URL was typed by a person, yet it is the server that sends the requests: it goes
//! through the SSRF guard web fetching uses (`ringfence_net::Guard`). Loopback, private,
//! link-local (cloud metadata) and the other non-public addresses are refused unless the
//! operator lists them in `[calendar] user_allow_private`; the check is made when the login
//! is saved (so nothing unusable is kept) and again by the client at every connection
//! (the guard is its resolver, so a name that later answers another address is checked
//! again). Plain `http://` is accepted only to a server the operator allowed that way: a
//! password sent in clear over the internet can be read on the way.

use std::sync::Arc;

use ringfence_net::{AllowList, Guard, GuardError};

/// The kind the login is kept under (`caldav-<user>.json`, or the credentials table's
/// `provider`).
pub const KIND: &str = "caldav";

/// The longest URL taken.
pub const MAX_URL: usize = 2048;
/// The longest username taken.
pub const MAX_USERNAME: usize = 256;
/// The longest password taken.
pub const MAX_PASSWORD: usize = 1024;

/// A CalDAV login a person entered.
#[derive(Clone, PartialEq, Eq)]
pub struct UserLogin {
    pub url: url::Url,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for UserLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserLogin")
            .field("url", &self.url.as_str())
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The guard of users' CalDAV URLs: the public internet, and what the operator allowed.
pub fn guard(allow: &AllowList) -> Arc<Guard> {
    Arc::new(Guard::new(allow.clone()))
}

/// The form's fields as a login, or what is wrong with them and how to put it right. Only
/// what can be told from the text: where the URL leads is [`check_reach`]'s.
pub fn parse_form(url: &str, username: &str, password: &str) -> Result<UserLogin, String> {
    let url = url.trim();
    if url.is_empty() {
        return Err("The CalDAV URL is empty: enter your calendar server's address, for example https://dav.example.org/remote.php/dav/ (your provider's help pages give it).".into());
    }
    if url.len() > MAX_URL {
        return Err(format!(
            "The CalDAV URL is {} characters long; at most {MAX_URL} are taken: enter the server's or your calendar's address, without anything after it.",
            url.len()
        ));
    }
    if url.chars().any(char::is_control) {
        return Err("The CalDAV URL contains a line break or another control character: enter the address on one line.".into());
    }
    let mut parsed = url::Url::parse(url).map_err(|e| {
        format!("The CalDAV URL is not a valid address ({e}): enter it whole, starting with https://, for example https://dav.example.org/")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "The CalDAV URL starts with `{}:`; only https:// (or http://) addresses are taken: enter your server's https:// address.",
            parsed.scheme()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("The CalDAV URL contains a username or password (`name:secret@`): leave them out of the URL and enter them in the Username and Password fields.".into());
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(
            "The CalDAV URL names no server: enter it whole, for example https://dav.example.org/."
                .into(),
        );
    }
    parsed.set_fragment(None);

    let username = username.trim();
    if username.is_empty() {
        return Err(
            "The username is empty: enter the name you sign in to your calendar server with."
                .into(),
        );
    }
    if username.chars().count() > MAX_USERNAME {
        return Err(format!(
            "The username is longer than {MAX_USERNAME} characters: enter the name you sign in with."
        ));
    }
    if username.chars().any(char::is_control) {
        return Err("The username contains a line break or another control character: enter it on one line.".into());
    }
    if username.contains(':') {
        return Err("The username contains `:`, which HTTP Basic sign-in cannot send: enter your account's name without it (your provider's help pages say which name to use).".into());
    }
    if password.is_empty() {
        return Err("The password is empty: enter your calendar server's password (an app password, where your provider has them). It is needed again for every change.".into());
    }
    if password.chars().count() > MAX_PASSWORD {
        return Err(format!(
            "The password is longer than {MAX_PASSWORD} characters: enter your calendar server's password (or an app password)."
        ));
    }
    if password.chars().any(char::is_control) {
        return Err("The password contains a line break or another control character, which cannot be sent: enter it on one line.".into());
    }
    Ok(UserLogin {
        url: parsed,
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

/// Whether the login's server may be reached from this server: resolved once, and every
/// address public or allowed by the operator; plain http only to a server the operator
/// allowed. (Blocking: it may wait on DNS.)
pub fn check_reach(login: &UserLogin, guard: &Guard) -> Result<(), String> {
    let vetted = guard
        .vet_url(login.url.clone())
        .map_err(|e| refusal_text(&e))?;
    if login.url.scheme() == "http"
        && vetted
            .addrs
            .iter()
            .any(|a| ringfence_net::guard::classify(a.ip()).is_ok())
    {
        return Err(format!(
            "The CalDAV URL uses plain http:// to {}, a server on the internet: your password could be read on the way. Enter its https:// address.",
            vetted.host
        ));
    }
    Ok(())
}

/// Why the guard refused a user's CalDAV URL, in the settings page's and the tools' words.
pub fn refusal_text(e: &GuardError) -> String {
    match e {
        // An address the person wrote: what it is.
        GuardError::Blocked { host, why, .. }
            if host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok() =>
        {
            format!(
                "The CalDAV URL's server {host} is {}: a URL you enter must be a server on the internet. If your calendar server is on a private network, the server's operator can allow it with [calendar] user_allow_private.",
                why.describe()
            )
        }
        // A name: one wording whether it is unknown or answers a private address, and no
        // address shown, so a person cannot map the server's own network by trying names.
        GuardError::Blocked { host, .. } | GuardError::NoAddress { host, .. } => format!(
            "The CalDAV URL's server {host} is not a public server this server can reach: check the address. A URL you enter must be a server on the internet; if your calendar server is on a private network, the server's operator can allow it with [calendar] user_allow_private."
        ),
        GuardError::Scheme { scheme } => format!(
            "The CalDAV URL starts with `{scheme}:`; only https:// (or http://) addresses are taken."
        ),
        GuardError::Credentials => "The CalDAV URL contains a username or password: leave them out of the URL and enter them in the Username and Password fields.".into(),
        GuardError::Invalid { why, .. } => {
            format!("The CalDAV URL is not a valid address ({why}): enter it whole.")
        }
    }
}

/// The login as kept: a JSON document.
pub fn to_doc(login: &UserLogin, now_ms: i64) -> String {
    serde_json::json!({
        "url": login.url.as_str(),
        "username": login.username,
        "password": login.password,
        "saved_at": ringfence_core::time::format_iso_ms(now_ms),
    })
    .to_string()
}

/// A kept login, checked again as a form would be (a document changed by hand is held to
/// the same rules).
pub fn from_doc(doc: &str) -> Result<UserLogin, String> {
    let v: serde_json::Value =
        serde_json::from_str(doc).map_err(|_| "it is not a JSON document".to_owned())?;
    let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    parse_form(&field("url"), &field("username"), &field("password"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn ok(url: &str) -> UserLogin {
        parse_form(url, "alice", "pw").unwrap()
    }

    #[test]
    fn every_bad_field_is_named_with_its_fix() {
        for (url, user, pw, says) in [
            ("", "alice", "pw", "URL is empty"),
            ("   ", "alice", "pw", "URL is empty"),
            ("dav.example.org", "alice", "pw", "not a valid address"),
            ("ftp://dav.example.org/", "alice", "pw", "`ftp:`"),
            ("file:///etc/passwd", "alice", "pw", "`file:`"),
            (
                "https://a:b@dav.example.org/",
                "alice",
                "pw",
                "leave them out",
            ),
            (
                "https://a@dav.example.org/",
                "alice",
                "pw",
                "leave them out",
            ),
            ("https://dav.example.org/\nx", "alice", "pw", "one line"),
            ("https://dav.example.org/", "", "pw", "username is empty"),
            ("https://dav.example.org/", "  ", "pw", "username is empty"),
            ("https://dav.example.org/", "a:b", "pw", "`:`"),
            ("https://dav.example.org/", "a\nb", "pw", "one line"),
            ("https://dav.example.org/", "alice", "", "password is empty"),
            ("https://dav.example.org/", "alice", "p\r\nw", "one line"),
        ] {
            let e = parse_form(url, user, pw).unwrap_err();
            assert!(e.contains(says), "{url:?} {user:?}: {e}");
            assert!(!pw.is_empty() && !e.contains(pw) || pw.is_empty(), "{e}");
        }
        let long_url = format!("https://dav.example.org/{}", "a".repeat(MAX_URL));
        assert!(
            parse_form(&long_url, "a", "b")
                .unwrap_err()
                .contains("at most 2048")
        );
        let e = parse_form("https://x.example/", &"u".repeat(MAX_USERNAME + 1), "b").unwrap_err();
        assert!(e.contains("longer than 256"), "{e}");
        let e = parse_form("https://x.example/", "u", &"p".repeat(MAX_PASSWORD + 1)).unwrap_err();
        assert!(e.contains("longer than 1024"), "{e}");
        // Taken: trimmed URL and name, the password as typed (spaces are characters).
        let l = parse_form(" https://dav.example.org/a/#x ", " alice ", " p w ").unwrap();
        assert_eq!(
            (l.url.as_str(), l.username.as_str(), l.password.as_str()),
            ("https://dav.example.org/a/", "alice", " p w ")
        );
        assert!(!format!("{l:?}").contains("p w"));
    }

    #[test]
    fn the_kept_document_round_trips_and_is_checked_again() {
        let l = parse_form("https://dav.example.org/", "alice", "s3cret").unwrap();
        let doc = to_doc(&l, 0);
        assert_eq!(from_doc(&doc).unwrap(), l);
        assert!(from_doc("not json").is_err());
        assert!(
            from_doc(r#"{"url":"https://a:b@x.example/","username":"u","password":"p"}"#).is_err()
        );
    }

    /// Answers every name with the given addresses.
    struct Answers(Vec<std::net::IpAddr>);
    impl ringfence_net::Resolve for Answers {
        fn resolve(&self, _host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
            Ok(self.0.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
        }
    }

    fn guard_with(allow: &[&str], answers: &[&str]) -> Guard {
        Guard::with_resolver(
            AllowList::parse(allow).unwrap(),
            Box::new(Answers(
                answers.iter().map(|a| a.parse().unwrap()).collect(),
            )),
        )
    }

    #[test]
    fn private_and_metadata_addresses_are_refused_unless_the_operator_allows_them() {
        let none = guard_with(&[], &["93.184.215.14"]);
        for (url, says) in [
            ("http://127.0.0.1:5232/", "loopback"),
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://10.0.0.5/", "private-network"),
            ("https://[::1]/", "loopback"),
            ("https://[::ffff:169.254.169.254]/", "link-local"),
            ("https://2130706433/", "loopback"),
            ("https://0x7f.1/", "loopback"),
        ] {
            let e = check_reach(&ok(url), &none).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
            assert!(e.contains("[calendar] user_allow_private"), "{e}");
        }
        // A name that answers a private address (or one of several) is refused too.
        let rebinding = guard_with(&[], &["93.184.215.14", "169.254.169.254"]);
        let e = check_reach(&ok("https://dav.example.org/"), &rebinding).unwrap_err();
        assert!(e.contains("not a public server"), "{e}");
        // …in the words an unknown name gets, without the address it answers.
        assert!(!e.contains("169.254") && !e.contains("link-local"), "{e}");
        // Public: taken over https, refused over plain http.
        check_reach(&ok("https://dav.example.org/"), &none).unwrap();
        let e = check_reach(&ok("http://dav.example.org/"), &none).unwrap_err();
        assert!(e.contains("https://"), "{e}");
        // Allowed by the operator: taken, plain http too (a server on their own network).
        let allowed = guard_with(&["127.0.0.1", "dav.internal.example"], &["10.9.8.7"]);
        check_reach(&ok("http://127.0.0.1:5232/"), &allowed).unwrap();
        check_reach(&ok("http://dav.internal.example/"), &allowed).unwrap();
        assert!(check_reach(&ok("https://169.254.169.254/"), &allowed).is_err());
        assert!(check_reach(&ok("https://other.internal.example/"), &allowed).is_err());
    }
}
