//! The `desktop` channel: a follow-up shown as a desktop notification through the
//! freedesktop notification service (`org.freedesktop.Notifications` on the session bus),
//! the check-in as its title and the context as its body.
//!
//! The session bus is reached with a small D-Bus client of our own: the address from
//! `DBUS_SESSION_BUS_ADDRESS` (a `unix:path=` or `unix:abstract=` socket), the `EXTERNAL`
//! authentication by the process's user id, `Hello`, then one method call and its reply.
//! Messages are little-endian, version 1; replies in either byte order are read.

// Off Unix there is no freedesktop bus: the channel says so, and the message code is unused.
#![cfg_attr(not(unix), allow(dead_code))]

#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Why the desktop could not be told.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    #[error(
        "no session bus: DBUS_SESSION_BUS_ADDRESS is not set in ringfence's environment (run it inside your desktop session, or use another channel)"
    )]
    NoBus,
    #[error("the session bus address `{0}` has no unix socket ringfence can use")]
    Address(String),
    #[error("cannot reach the session bus: {0}")]
    Io(#[from] std::io::Error),
    #[error("the session bus refused ringfence's login: {0}")]
    Auth(String),
    #[error("{name}: {message}")]
    Remote { name: String, message: String },
    #[error("the session bus answered something ringfence cannot read: {0}")]
    Protocol(String),
    #[error("the session bus did not answer within {0:.0?}")]
    TimedOut(Duration),
    /// Not a platform with a freedesktop session bus (Windows).
    #[error(
        "desktop notifications need a freedesktop session bus (Linux and other Unix desktops); this platform has none: use another channel"
    )]
    Unsupported,
}

/// The notification service's name, its object and its interface.
const SERVICE: &str = "org.freedesktop.Notifications";
const OBJECT: &str = "/org/freedesktop/Notifications";

/// A connection to the session bus, after `Hello`, and when the whole exchange must end.
#[cfg(unix)]
struct Bus {
    stream: UnixStream,
    serial: u32,
    deadline: std::time::Instant,
    timeout: Duration,
}

/// Shows a notification: `title` and `body`, from ringfence. Returns the id the service gave.
pub fn notify(title: &str, body: &str, timeout: Duration) -> Result<u32, DesktopError> {
    #[cfg(not(unix))]
    {
        let _ = (title, body, timeout);
        Err(DesktopError::Unsupported)
    }
    #[cfg(unix)]
    notify_unix(title, body, timeout)
}

#[cfg(unix)]
fn notify_unix(title: &str, body: &str, timeout: Duration) -> Result<u32, DesktopError> {
    let mut bus = Bus::connect(timeout)?;
    let mut args = Writer::default();
    args.string("ringfence"); // app_name
    args.u32(0); // replaces_id
    args.string(""); // app_icon
    args.string(title); // summary
    args.string(body); // body
    args.array(4, |_| {}); // actions: as
    args.array(8, |_| {}); // hints: a{sv}
    args.u32(-1i32 as u32); // expire_timeout: the server's default
    let reply = bus.call(
        SERVICE,
        OBJECT,
        SERVICE,
        "Notify",
        "susssasa{sv}i",
        args.bytes,
    )?;
    reply.u32_at_start()
}

/// The notification service's name and vendor (`GetServerInformation`): whether one runs,
/// without showing anything.
pub fn server_information(timeout: Duration) -> Result<String, DesktopError> {
    #[cfg(not(unix))]
    {
        let _ = timeout;
        Err(DesktopError::Unsupported)
    }
    #[cfg(unix)]
    server_information_unix(timeout)
}

#[cfg(unix)]
fn server_information_unix(timeout: Duration) -> Result<String, DesktopError> {
    let mut bus = Bus::connect(timeout)?;
    let reply = bus.call(
        SERVICE,
        OBJECT,
        SERVICE,
        "GetServerInformation",
        "",
        Vec::new(),
    )?;
    let mut r = reply.reader();
    let name = r.string()?;
    let vendor = r.string()?;
    Ok(format!("{name} ({vendor})"))
}

#[cfg(unix)]
impl Bus {
    fn connect(timeout: Duration) -> Result<Bus, DesktopError> {
        let address = std::env::var("DBUS_SESSION_BUS_ADDRESS")
            .ok()
            .filter(|a| !a.is_empty())
            .ok_or(DesktopError::NoBus)?;
        let stream = open(&address)?;
        let mut bus = Bus {
            stream,
            serial: 0,
            deadline: std::time::Instant::now() + timeout,
            timeout,
        };
        bus.tick()?;
        bus.authenticate()?;
        bus.call(
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "Hello",
            "",
            Vec::new(),
        )?;
        Ok(bus)
    }

    /// Bounds the next read or write by what is left of the exchange's time.
    fn tick(&mut self) -> Result<(), DesktopError> {
        let left = self
            .deadline
            .checked_duration_since(std::time::Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(DesktopError::TimedOut(self.timeout))?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))?;
        Ok(())
    }

    /// The `EXTERNAL` mechanism: the bus checks our uid on the socket.
    fn authenticate(&mut self) -> Result<(), DesktopError> {
        let uid = rustix::process::getuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        self.stream.write_all(b"\0")?;
        self.stream
            .write_all(format!("AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let line = self.read_line()?;
        if !line.starts_with("OK ") {
            return Err(DesktopError::Auth(line));
        }
        self.stream.write_all(b"BEGIN\r\n")?;
        Ok(())
    }

    fn read_line(&mut self) -> Result<String, DesktopError> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if line.len() > 4096 {
                return Err(DesktopError::Protocol(
                    "an endless authentication line".into(),
                ));
            }
            self.tick()?;
            self.stream.read_exact(&mut byte)?;
            line.push(byte[0]);
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// Sends a method call and waits for its reply (other messages — the bus's signals —
    /// are passed over).
    fn call(
        &mut self,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
        signature: &str,
        body: Vec<u8>,
    ) -> Result<Message, DesktopError> {
        self.serial += 1;
        let serial = self.serial;
        let mut m = Writer::default();
        m.byte(b'l');
        m.byte(1); // METHOD_CALL
        m.byte(0); // flags
        m.byte(1); // protocol version
        m.u32(body.len() as u32);
        m.u32(serial);
        m.array(8, |f| {
            f.field(1, "o", |w| w.string(path));
            f.field(2, "s", |w| w.string(interface));
            f.field(3, "s", |w| w.string(member));
            f.field(6, "s", |w| w.string(destination));
            if !signature.is_empty() {
                f.field(8, "g", |w| w.signature(signature));
            }
        });
        m.align(8);
        m.bytes.extend_from_slice(&body);
        self.stream.write_all(&m.bytes)?;
        loop {
            self.tick()?;
            let reply = self.read_message()?;
            if reply.reply_serial != Some(serial) {
                continue;
            }
            return match reply.kind {
                2 => Ok(reply),
                3 => {
                    let message = reply.reader().string().unwrap_or_default();
                    Err(DesktopError::Remote {
                        name: reply.error_name.unwrap_or_default(),
                        message,
                    })
                }
                k => Err(DesktopError::Protocol(format!(
                    "a message of type {k} in reply"
                ))),
            };
        }
    }

    fn read_message(&mut self) -> Result<Message, DesktopError> {
        let mut fixed = [0u8; 16];
        self.stream.read_exact(&mut fixed)?;
        let little = match fixed[0] {
            b'l' => true,
            b'B' => false,
            other => {
                return Err(DesktopError::Protocol(format!(
                    "byte order mark {other:#x}"
                )));
            }
        };
        let u32_of = |b: &[u8]| {
            let a = [b[0], b[1], b[2], b[3]];
            if little {
                u32::from_le_bytes(a)
            } else {
                u32::from_be_bytes(a)
            }
        };
        let body_len = u32_of(&fixed[4..8]) as usize;
        let fields_len = u32_of(&fixed[12..16]) as usize;
        // The bus's limit for a whole message is 128 MiB; ours is far smaller.
        if body_len > 1 << 20 || fields_len > 1 << 16 {
            return Err(DesktopError::Protocol("a message too large".into()));
        }
        let header_end = (16 + fields_len).next_multiple_of(8);
        let mut rest = vec![0u8; header_end - 16 + body_len];
        self.stream.read_exact(&mut rest)?;
        let mut whole = fixed.to_vec();
        whole.extend_from_slice(&rest);
        let mut message = Message {
            kind: fixed[1],
            little,
            reply_serial: None,
            error_name: None,
            body_start: header_end,
            bytes: whole,
        };
        // The header fields: a(yv).
        let mut r = Reader {
            bytes: &message.bytes[..16 + fields_len],
            at: 16,
            little,
        };
        while r.at < 16 + fields_len {
            r.align(8);
            if r.at >= 16 + fields_len {
                break;
            }
            let code = r.byte()?;
            let sig = r.signature()?;
            match (code, sig.as_str()) {
                (5, "u") => message.reply_serial = Some(r.u32()?),
                (4, "s") => message.error_name = Some(r.string()?),
                (_, "s" | "o") => {
                    r.string()?;
                }
                (_, "g") => {
                    r.signature()?;
                }
                (_, "u") => {
                    r.u32()?;
                }
                (_, other) => {
                    return Err(DesktopError::Protocol(format!(
                        "a header field of type {other}"
                    )));
                }
            }
        }
        Ok(message)
    }
}

/// Opens the first usable `unix:` address of `address` (`;`-separated).
#[cfg(unix)]
fn open(address: &str) -> Result<UnixStream, DesktopError> {
    let mut last = None;
    for one in address.split(';') {
        let Some(params) = one.strip_prefix("unix:") else {
            continue;
        };
        for kv in params.split(',') {
            let opened = match kv.split_once('=') {
                Some(("path", p)) => UnixStream::connect(unescape(p)),
                #[cfg(target_os = "linux")]
                Some(("abstract", name)) => {
                    use std::os::linux::net::SocketAddrExt;
                    std::os::unix::net::SocketAddr::from_abstract_name(unescape(name).as_bytes())
                        .and_then(|a| UnixStream::connect_addr(&a))
                }
                _ => continue,
            };
            match opened {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
    }
    Err(match last {
        Some(e) => DesktopError::Io(e),
        None => DesktopError::Address(address.to_owned()),
    })
}

/// A D-Bus address value with its `%xx` escapes undone.
fn unescape(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A message received.
struct Message {
    kind: u8,
    little: bool,
    reply_serial: Option<u32>,
    error_name: Option<String>,
    body_start: usize,
    bytes: Vec<u8>,
}

impl Message {
    fn reader(&self) -> Reader<'_> {
        Reader {
            bytes: &self.bytes,
            at: self.body_start,
            little: self.little,
        }
    }

    fn u32_at_start(&self) -> Result<u32, DesktopError> {
        self.reader().u32()
    }
}

/// Reads values at their D-Bus alignment (offsets count from the message's start).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    little: bool,
}

impl Reader<'_> {
    fn short() -> DesktopError {
        DesktopError::Protocol("a message cut short".into())
    }

    fn align(&mut self, n: usize) {
        self.at = self.at.next_multiple_of(n);
    }

    fn byte(&mut self) -> Result<u8, DesktopError> {
        let b = *self.bytes.get(self.at).ok_or_else(Self::short)?;
        self.at += 1;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, DesktopError> {
        self.align(4);
        let b = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or_else(Self::short)?;
        self.at += 4;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if self.little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }

    /// `len` bytes of text, then the NUL that ends them.
    fn text(&mut self, len: usize) -> Result<String, DesktopError> {
        let b = self
            .bytes
            .get(self.at..self.at + len)
            .ok_or_else(Self::short)?;
        self.at += len + 1;
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    fn string(&mut self) -> Result<String, DesktopError> {
        let len = self.u32()? as usize;
        self.text(len)
    }

    fn signature(&mut self) -> Result<String, DesktopError> {
        let len = self.byte()? as usize;
        self.text(len)
    }
}

/// Writes values at their D-Bus alignment, little-endian (offsets count from the start of
/// what is written: a message, or a body, which starts 8-aligned in its message).
#[derive(Default)]
struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    fn align(&mut self, n: usize) {
        let to = self.bytes.len().next_multiple_of(n);
        self.bytes.resize(to, 0);
    }

    fn byte(&mut self, b: u8) {
        self.bytes.push(b);
    }

    fn u32(&mut self, v: u32) {
        self.align(4);
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// A string; D-Bus allows no NUL inside one, so any is written as a space.
    fn string(&mut self, s: &str) {
        let s = s.replace('\0', " ");
        self.u32(s.len() as u32);
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
    }

    fn signature(&mut self, s: &str) {
        self.byte(s.len() as u8);
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
    }

    /// An array whose elements align to `element_align`, written by `elements`.
    fn array(&mut self, element_align: usize, elements: impl FnOnce(&mut Writer)) {
        self.align(4);
        let length_at = self.bytes.len();
        self.bytes.extend_from_slice(&[0; 4]);
        self.align(element_align);
        let start = self.bytes.len();
        elements(self);
        let len = (self.bytes.len() - start) as u32;
        self.bytes[length_at..length_at + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// One header field: a `(yv)` struct.
    fn field(&mut self, code: u8, signature: &str, value: impl FnOnce(&mut Writer)) {
        self.align(8);
        self.byte(code);
        self.signature(signature);
        value(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_at_their_alignment() {
        let mut w = Writer::default();
        w.byte(1);
        w.string("ab");
        assert_eq!(w.bytes, [1, 0, 0, 0, 2, 0, 0, 0, b'a', b'b', 0]);
        let mut w = Writer::default();
        w.array(8, |_| {});
        // An empty array of 8-aligned elements: its length, then padding to 8.
        assert_eq!(w.bytes, [0, 0, 0, 0, 0, 0, 0, 0]);
        let mut w = Writer::default();
        w.array(4, |a| a.string("x"));
        assert_eq!(w.bytes, [6, 0, 0, 0, 1, 0, 0, 0, b'x', 0]);
        // No NUL inside a string: the bus would drop the connection.
        let mut w = Writer::default();
        w.string("a\0b");
        assert_eq!(w.bytes, [3, 0, 0, 0, b'a', b' ', b'b', 0]);
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut w = Writer::default();
        w.signature("su");
        w.string("héllo");
        w.u32(7);
        let mut r = Reader {
            bytes: &w.bytes,
            at: 0,
            little: true,
        };
        assert_eq!(r.signature().unwrap(), "su");
        assert_eq!(r.string().unwrap(), "héllo");
        assert_eq!(r.u32().unwrap(), 7);
        assert!(r.u32().is_err(), "past the end is an error, not a panic");
    }

    #[test]
    fn addresses_are_unescaped_and_a_missing_bus_is_said() {
        assert_eq!(unescape("/run/user/1000/bus"), "/run/user/1000/bus");
        assert_eq!(unescape("/tmp/a%20b"), "/tmp/a b");
        assert!(matches!(
            open("tcp:host=localhost,port=1"),
            Err(DesktopError::Address(_))
        ));
    }
}
