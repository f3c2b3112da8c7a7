//! robots.txt (RFC 9309): the rules of the group for ringfence's product token, else of
//! the `*` group; the longest matching pattern decides, `Allow` winning a tie; `*` matches
//! any run of characters and a final `$` anchors the end.

/// The rules that apply to ringfence on one site.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Robots {
    /// (allow?, pattern)
    rules: Vec<(bool, String)>,
}

/// The most of a robots.txt that is read (RFC 9309 asks for at least 500 KiB).
pub const MAX_ROBOTS_BYTES: usize = 512 << 10;

impl Robots {
    /// Everything allowed (no robots.txt, or one that could not be found).
    pub fn allow_all() -> Robots {
        Robots::default()
    }

    /// Everything disallowed (the site's robots.txt could not be read because of a server
    /// error: RFC 9309 says to assume a complete disallow).
    pub fn disallow_all() -> Robots {
        Robots {
            rules: vec![(false, "/".into())],
        }
    }

    /// The rules in `text` for the agent named `token` (e.g. `ringfence`).
    pub fn parse(text: &str, token: &str) -> Robots {
        let token = token.to_ascii_lowercase();
        let mut ours: Vec<(bool, String)> = Vec::new();
        let mut star: Vec<(bool, String)> = Vec::new();
        let mut named_us = false;
        // The agents of the group being read, and whether its rules have begun.
        let mut agents: Vec<String> = Vec::new();
        let mut in_rules = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            match key.as_str() {
                "user-agent" => {
                    if in_rules {
                        agents.clear();
                        in_rules = false;
                    }
                    let agent = value.to_ascii_lowercase();
                    named_us |= is_ours(&agent, &token);
                    agents.push(agent);
                }
                "allow" | "disallow" => {
                    in_rules = true;
                    if value.is_empty() {
                        continue;
                    }
                    let rule = (key == "allow", value.to_owned());
                    if agents.iter().any(|a| is_ours(a, &token)) {
                        ours.push(rule.clone());
                    }
                    if agents.iter().any(|a| a == "*") {
                        star.push(rule);
                    }
                }
                _ => {}
            }
        }
        // A group naming ringfence, even without rules, replaces the `*` group.
        Robots {
            rules: if named_us { ours } else { star },
        }
    }

    /// Whether `path` (the URL's path and query) may be fetched.
    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if matches(pattern, path) {
                let len = pattern.len();
                best = match best {
                    Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                    _ => Some((len, *allow)),
                };
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// Whether a `User-agent` value names the product `token` (case-insensitively).
fn is_ours(agent: &str, token: &str) -> bool {
    agent == token
}

/// Whether a robots pattern matches the start of `path`.
fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut pos = 0;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            if !path.starts_with(part) {
                return false;
            }
            pos = part.len();
        } else if i == parts.len() - 1 && anchored {
            return path.len() >= pos + part.len() && path.ends_with(part);
        } else {
            match path[pos..].find(part) {
                Some(at) => pos += at + part.len(),
                None => return false,
            }
        }
    }
    !anchored || pos == path.len() || (parts.len() > 1 && parts.last() == Some(&""))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
User-agent: *
Disallow: /private/
Allow: /private/open$
Disallow: /*.pdf$

User-agent: OtherBot
User-agent: ringfence
Disallow: /no-ringfence
";

    #[test]
    fn our_group_beats_the_star_group() {
        let ours = Robots::parse(TEXT, "ringfence");
        assert!(!ours.allows("/no-ringfence/page"));
        assert!(ours.allows("/private/x"), "the * group does not apply");
        let other = Robots::parse(TEXT, "somebot");
        assert!(!other.allows("/private/x"));
        assert!(other.allows("/private/open"));
        assert!(!other.allows("/private/open2"));
        assert!(!other.allows("/docs/a.pdf"));
        assert!(other.allows("/docs/a.pdf?x=1"));
        assert!(other.allows("/"));
    }

    #[test]
    fn the_longest_match_decides_and_allow_wins_a_tie() {
        let r = Robots::parse(
            "User-agent: *\nDisallow: /a\nAllow: /a/b\nAllow: /c\nDisallow: /c\n",
            "ringfence",
        );
        assert!(!r.allows("/a/x"));
        assert!(r.allows("/a/b/x"));
        assert!(r.allows("/c"));
        assert!(Robots::parse("User-agent: *\nDisallow:\n", "ringfence").allows("/x"));
        assert!(!Robots::disallow_all().allows("/"));
        assert!(Robots::allow_all().allows("/anything"));
    }
}
