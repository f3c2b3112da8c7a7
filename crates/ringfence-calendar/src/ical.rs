//! iCalendar (RFC 5545) text as a tree: components holding ordered properties with their
//! parameters, read and written back without losing what ringfence does not interpret
//! (alarms, attendees, X- properties, time zone definitions).

use std::fmt::Write as _;

/// One property: `NAME;PARAM=a,b:value` (the value unescaped only when asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// Upper case.
    pub name: String,
    /// Parameter names upper case; values as written (quotes removed).
    pub params: Vec<(String, Vec<String>)>,
    /// The raw value (escapes kept): see [`Property::text`].
    pub value: String,
}

impl Property {
    pub fn new(name: &str, value: impl Into<String>) -> Property {
        Property {
            name: name.to_ascii_uppercase(),
            params: Vec::new(),
            value: value.into(),
        }
    }

    /// A TEXT property, its value escaped.
    pub fn text(name: &str, text: &str) -> Property {
        Property::new(name, escape(text))
    }

    pub fn with_param(mut self, name: &str, value: &str) -> Property {
        self.params
            .push((name.to_ascii_uppercase(), vec![value.to_owned()]));
        self
    }

    /// The first value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.first())
            .map(String::as_str)
    }

    /// The value as TEXT, unescaped.
    pub fn text_value(&self) -> String {
        unescape(&self.value)
    }
}

/// A component: `BEGIN:NAME` … `END:NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Component {
    /// Upper case.
    pub name: String,
    pub props: Vec<Property>,
    pub children: Vec<Component>,
}

impl Component {
    pub fn new(name: &str) -> Component {
        Component {
            name: name.to_ascii_uppercase(),
            ..Component::default()
        }
    }

    pub fn prop(&self, name: &str) -> Option<&Property> {
        self.props
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }

    pub fn props_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Property> + 'a {
        self.props
            .iter()
            .filter(move |p| p.name.eq_ignore_ascii_case(name))
    }

    /// The unescaped text of property `name`.
    pub fn text(&self, name: &str) -> Option<String> {
        self.prop(name).map(Property::text_value)
    }

    /// Replaces every property `name` by `prop` (placed where the first was), or removes
    /// them with `None`.
    pub fn set(&mut self, name: &str, prop: Option<Property>) {
        let at = self
            .props
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name));
        self.props.retain(|p| !p.name.eq_ignore_ascii_case(name));
        if let Some(p) = prop {
            let at = at.unwrap_or(self.props.len()).min(self.props.len());
            self.props.insert(at, p);
        }
    }

    pub fn push(&mut self, prop: Property) {
        self.props.push(prop);
    }

    /// This component as iCalendar text, lines folded at 75 octets, CRLF ends.
    pub fn to_ics(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        line(out, &format!("BEGIN:{}", self.name));
        for p in &self.props {
            let mut l = p.name.clone();
            for (n, vals) in &p.params {
                let vals: Vec<String> = vals.iter().map(|v| quote_param(v)).collect();
                let _ = write!(l, ";{n}={}", vals.join(","));
            }
            l.push(':');
            l.push_str(&p.value);
            line(out, &l);
        }
        for c in &self.children {
            c.write(out);
        }
        line(out, &format!("END:{}", self.name));
    }
}

/// Why a text is not iCalendar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid iCalendar (line {line}): {why}")]
pub struct ParseError {
    pub line: usize,
    pub why: String,
}

/// The deepest nesting accepted (real calendars use 3: VCALENDAR, VEVENT, VALARM).
pub const MAX_DEPTH: usize = 8;

/// Parses every top-level component of `text` (usually one `VCALENDAR`).
pub fn parse(text: &str) -> Result<Vec<Component>, ParseError> {
    let mut stack: Vec<Component> = Vec::new();
    let mut done = Vec::new();
    for (n, raw) in unfold(text) {
        if raw.trim().is_empty() {
            continue;
        }
        let err = |why: &str| ParseError {
            line: n,
            why: why.to_owned(),
        };
        let prop = parse_line(&raw).ok_or_else(|| err("a line without `name:value`"))?;
        match prop.name.as_str() {
            "BEGIN" => {
                if stack.len() >= MAX_DEPTH {
                    return Err(err("components nested too deep"));
                }
                stack.push(Component::new(prop.value.trim()))
            }
            "END" => {
                let c = stack.pop().ok_or_else(|| err("END without BEGIN"))?;
                if !c.name.eq_ignore_ascii_case(prop.value.trim()) {
                    return Err(err(&format!("END:{} closes BEGIN:{}", prop.value, c.name)));
                }
                match stack.last_mut() {
                    Some(parent) => parent.children.push(c),
                    None => done.push(c),
                }
            }
            _ => stack
                .last_mut()
                .ok_or_else(|| err("a property outside any component"))?
                .props
                .push(prop),
        }
    }
    if let Some(open) = stack.last() {
        return Err(ParseError {
            line: 0,
            why: format!("BEGIN:{} is never closed", open.name),
        });
    }
    Ok(done)
}

/// Logical lines (folds joined) with the number of their first physical line.
fn unfold(text: &str) -> Vec<(usize, String)> {
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        let l = l.strip_suffix('\r').unwrap_or(l);
        if let Some(rest) = l.strip_prefix([' ', '\t'])
            && let Some(last) = lines.last_mut()
        {
            last.1.push_str(rest);
        } else {
            lines.push((i + 1, l.to_owned()));
        }
    }
    lines
}

/// `NAME;P=v;Q="a,b":value`.
fn parse_line(l: &str) -> Option<Property> {
    let bytes = l.as_bytes();
    // The name ends at the first `;` or `:`.
    let name_end = l.find([';', ':'])?;
    let name = l[..name_end].trim().to_ascii_uppercase();
    if name.is_empty() {
        return None;
    }
    let mut params = Vec::new();
    let mut i = name_end;
    while bytes.get(i) == Some(&b';') {
        i += 1;
        let eq = i + l[i..].find('=')?;
        let pname = l[i..eq].trim().to_ascii_uppercase();
        i = eq + 1;
        let mut values = Vec::new();
        loop {
            let v;
            if bytes.get(i) == Some(&b'"') {
                let close = i + 1 + l[i + 1..].find('"')?;
                v = l[i + 1..close].to_owned();
                i = close + 1;
            } else {
                let end = i + l[i..].find([',', ';', ':'])?;
                v = l[i..end].to_owned();
                i = end;
            }
            values.push(v);
            if bytes.get(i) == Some(&b',') {
                i += 1;
            } else {
                break;
            }
        }
        params.push((pname, values));
    }
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    Some(Property {
        name,
        params,
        value: l[i + 1..].to_owned(),
    })
}

fn quote_param(v: &str) -> String {
    if v.contains([',', ';', ':']) {
        format!("\"{}\"", v.replace('"', ""))
    } else {
        v.to_owned()
    }
}

/// Writes `l` folded: at most 75 octets per physical line, never inside a character.
fn line(out: &mut String, l: &str) {
    let mut width = 0;
    for ch in l.chars() {
        let w = ch.len_utf8();
        if width + w > 75 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(ch);
        width += w;
    }
    out.push_str("\r\n");
}

/// TEXT escaping: backslash, `;`, `,` and newlines.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            Some('n' | 'N') => out.push('\n'),
            Some(c) => out.push(c),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_folds_params_and_escapes() {
        let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:a@b\r\nDTSTART;TZID=America/New_York:20260129T100000\r\nSUMMARY:Team\\, sync\\; weekly\r\nDESCRIPTION:line one\\nline two with a very long tail that has to be folded be\r\n cause it is long\r\nATTENDEE;CN=\"Doe, Jane\";ROLE=REQ-PARTICIPANT:mailto:jane@example.org\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let parsed = parse(text).unwrap();
        let ev = &parsed[0].children[0];
        assert_eq!(ev.name, "VEVENT");
        assert_eq!(ev.text("SUMMARY").unwrap(), "Team, sync; weekly");
        assert!(
            ev.text("DESCRIPTION")
                .unwrap()
                .contains("folded because it is long")
        );
        assert_eq!(
            ev.prop("DTSTART").unwrap().param("tzid"),
            Some("America/New_York")
        );
        assert_eq!(ev.prop("ATTENDEE").unwrap().param("CN"), Some("Doe, Jane"));
        assert_eq!(ev.children[0].name, "VALARM");
        let again = parse(&parsed[0].to_ics()).unwrap();
        assert_eq!(again, parsed);
        for l in parsed[0].to_ics().split("\r\n") {
            assert!(l.len() <= 75, "{l}");
        }
    }

    #[test]
    fn broken_text_is_an_error_naming_the_line() {
        assert_eq!(
            parse("BEGIN:VCALENDAR\r\nEND:VEVENT\r\n").unwrap_err().line,
            2
        );
        assert!(parse("BEGIN:VCALENDAR\r\n").is_err());
        assert!(parse("just text\r\n").is_err());
        // Deep nesting is refused, not built (dropping it would recurse).
        let deep = "BEGIN:X\r\n".repeat(100_000);
        assert!(parse(&deep).unwrap_err().why.contains("too deep"));
    }
}
