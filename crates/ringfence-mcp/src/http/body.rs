//! Request bodies. They are read only after the sender was authenticated and admitted, within
//! a size limit, a time limit and a share of a server-wide budget of buffered bytes; during a
//! shutdown they are inspected by a scanner that keeps nothing (no JSON tree is built).

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use http_body::Frame;

use super::refusal::Refusal;

/// How request bodies are bounded.
#[derive(Debug)]
pub(super) struct BodyLimits {
    /// Largest body accepted.
    pub(super) max_bytes: usize,
    /// The whole body must have arrived this long after the request was admitted.
    pub(super) timeout: Option<Duration>,
    budget: Arc<Budget>,
}

/// Bytes of request bodies held at once, over every request: a server-wide cap.
#[derive(Debug)]
pub(super) struct Budget {
    cap: usize,
    used: AtomicUsize,
}

impl Budget {
    fn new(cap: usize) -> Budget {
        Budget {
            cap,
            used: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes of the budget, if that many are left.
    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(n).filter(|total| *total <= self.cap)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::SeqCst);
    }

    /// Bytes taken now.
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}

/// The bytes one request holds of the budget, given back when the last holder lets go: both
/// the body being read and the response hold it, since the request, once parsed, lives until
/// it has been answered.
#[derive(Debug)]
pub(super) struct Reservation {
    budget: Arc<Budget>,
    bytes: AtomicUsize,
}

impl Reservation {
    /// Makes the reservation at least `total` bytes; `false` if the budget has not that many.
    fn grow_to(&self, total: usize) -> bool {
        let have = self.bytes.load(Ordering::SeqCst);
        if total <= have {
            return true;
        }
        if !self.budget.try_take(total - have) {
            return false;
        }
        self.bytes.store(total, Ordering::SeqCst);
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(*self.bytes.get_mut());
    }
}

/// Why a body was not read to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyFailure {
    TimedOut,
    TooLarge,
    BudgetFull,
}

impl BodyLimits {
    pub(super) fn new(max_bytes: usize, timeout: Option<Duration>, budget: usize) -> BodyLimits {
        BodyLimits {
            max_bytes,
            timeout,
            budget: Arc::new(Budget::new(budget)),
        }
    }

    #[cfg(test)]
    pub(super) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Before reading anything: a declared length over the limit is refused (413), one the
    /// budget cannot hold now is told to come back (503). The declared length is reserved.
    pub(super) fn admit(&self, content_length: Option<u64>) -> Result<Arc<Reservation>, Refusal> {
        let reservation = Arc::new(Reservation {
            budget: self.budget.clone(),
            bytes: AtomicUsize::new(0),
        });
        if let Some(len) = content_length {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > self.max_bytes {
                return Err(self.refusal(BodyFailure::TooLarge));
            }
            if !reservation.grow_to(len) {
                return Err(self.refusal(BodyFailure::BudgetFull));
            }
        }
        Ok(reservation)
    }

    /// `body`, read under the limits; what cut it short is kept in the returned cell.
    pub(super) fn wrap(
        &self,
        body: Body,
        reservation: Arc<Reservation>,
    ) -> (Body, Arc<OnceLock<BodyFailure>>) {
        let failure = Arc::new(OnceLock::new());
        let limited = LimitedBody {
            inner: body,
            deadline: self.timeout.map(|t| Box::pin(tokio::time::sleep(t))),
            read: 0,
            max_bytes: self.max_bytes,
            reservation,
            failure: failure.clone(),
            done: false,
        };
        (Body::new(limited), failure)
    }

    /// The answer to a body cut short.
    pub(super) fn refusal(&self, failure: BodyFailure) -> Refusal {
        match failure {
            BodyFailure::TimedOut => {
                let secs = self.timeout.map(|t| t.as_secs()).unwrap_or(0);
                Refusal::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    format!(
                        "the request body did not arrive within {secs} s (http.body_timeout_secs); send it faster or raise the setting"
                    ),
                )
                .setting("http.body_timeout_secs")
            }
            BodyFailure::TooLarge => Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_size",
                format!(
                    "the request body is larger than {} MiB (http.max_body_mib)",
                    self.max_bytes >> 20
                ),
            )
            .setting("http.max_body_mib"),
            BodyFailure::BudgetFull => Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "buffered_bytes",
                format!(
                    "the server holds {} MiB of request bodies already, all it buffers at once (http.max_buffered_mib); retry shortly",
                    self.budget.cap >> 20
                ),
            )
            .setting("http.max_buffered_mib")
            .retry_after(2),
        }
    }
}

/// Why reading a body stopped (what the HTTP service reading it sees).
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    #[error("request body cut short: {0:?}")]
    Limit(BodyFailure),
    #[error(transparent)]
    Read(axum::Error),
}

/// A request body read under [`BodyLimits`]: every data frame counts against the size limit
/// and the budget, and the body fails once the deadline passes.
struct LimitedBody {
    inner: Body,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    read: usize,
    max_bytes: usize,
    reservation: Arc<Reservation>,
    failure: Arc<OnceLock<BodyFailure>>,
    done: bool,
}

impl LimitedBody {
    fn fail(&mut self, why: BodyFailure) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let _ = self.failure.set(why);
        self.done = true;
        Poll::Ready(Some(Err(BodyError::Limit(why))))
    }

    fn late(&self) -> bool {
        self.deadline.as_ref().is_some_and(|d| d.is_elapsed())
    }
}

impl http_body::Body for LimitedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if this.late() {
                    return this.fail(BodyFailure::TimedOut);
                }
                if let Some(data) = frame.data_ref() {
                    this.read = this.read.saturating_add(data.len());
                    if this.read > this.max_bytes {
                        return this.fail(BodyFailure::TooLarge);
                    }
                    if !this.reservation.grow_to(this.read) {
                        return this.fail(BodyFailure::BudgetFull);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = true;
                Poll::Ready(Some(Err(BodyError::Read(e))))
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(deadline) = &mut this.deadline
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    return this.fail(BodyFailure::TimedOut);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Deepest nesting the scanner follows (serde_json's own default recursion limit).
const MAX_DEPTH: usize = 128;

/// Whether a JSON-RPC body — one message or a batch — carries only answers and notifications:
/// nothing that starts work (a request has both `method` and `id`). The bytes are read once
/// and nothing is kept (no allocation, nesting bounded by [`MAX_DEPTH`]). Anything the scanner
/// cannot read, and anything but objects in a batch, counts as new work: during a shutdown an
/// unreadable body is refused, not guessed at.
pub(crate) fn only_answers_and_notifications(json: &[u8]) -> bool {
    // JSON text is UTF-8; what is not cannot be read by the server either (found by the
    // `jsonrpc` fuzz target). Checked in place, in one pass.
    if std::str::from_utf8(json).is_err() {
        return false;
    }
    let mut s = Scanner { b: json, i: 0 };
    s.ws();
    let passes = match s.peek() {
        Some(b'{') => s.message().map(|is_request| !is_request),
        Some(b'[') => s.batch(),
        _ => Err(Malformed),
    };
    s.ws();
    passes == Ok(true) && s.i == json.len()
}

#[derive(Debug, PartialEq)]
struct Malformed;

/// The top-level keys the scanner tells apart.
#[derive(Debug, PartialEq)]
enum Key {
    Method,
    Id,
    Other,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Result<u8, Malformed> {
        let c = self.peek().ok_or(Malformed)?;
        self.i += 1;
        Ok(c)
    }

    fn expect(&mut self, c: u8) -> Result<(), Malformed> {
        if self.next()? == c {
            Ok(())
        } else {
            Err(Malformed)
        }
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// `[` message, ... `]`: `Ok(true)` when every element is an object that is not a
    /// request. Stops at the first request.
    fn batch(&mut self) -> Result<bool, Malformed> {
        self.expect(b'[')?;
        self.ws();
        if self.peek() == Some(b']') {
            return Ok(false); // an empty batch is invalid JSON-RPC
        }
        loop {
            self.ws();
            if self.peek() != Some(b'{') || self.message()? {
                return Ok(false);
            }
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Ok(true),
                _ => return Err(Malformed),
            }
        }
    }

    /// One message object; `Ok(true)` when it is a request (has `method` and `id`).
    fn message(&mut self) -> Result<bool, Malformed> {
        self.expect(b'{')?;
        self.ws();
        let (mut method, mut id) = (false, false);
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(false);
        }
        loop {
            self.ws();
            match self.key()? {
                Key::Method => method = true,
                Key::Id => id = true,
                Key::Other => {}
            }
            self.ws();
            self.expect(b':')?;
            self.ws();
            self.value(1)?;
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => return Ok(method && id),
                _ => return Err(Malformed),
            }
        }
    }

    /// A string, compared with `method` and `id` as decoded (escapes included: `"\u0069d"` is
    /// `id`, as any JSON parser reads it), without keeping it.
    fn key(&mut self) -> Result<Key, Malformed> {
        const METHOD: &[u8] = b"method";
        const ID: &[u8] = b"id";
        self.expect(b'"')?;
        let (mut may_method, mut may_id, mut n) = (true, true, 0usize);
        loop {
            let unit = match self.next()? {
                b'"' => break,
                b'\\' => self.escape()?,
                c if c < 0x20 => return Err(Malformed),
                c => u32::from(c),
            };
            // Only ASCII can match; a character past the end of a name ends the match.
            let c = u8::try_from(unit).ok().filter(u8::is_ascii);
            may_method &= c.is_some() && METHOD.get(n).copied() == c;
            may_id &= c.is_some() && ID.get(n).copied() == c;
            n += 1;
        }
        Ok(if may_method && n == METHOD.len() {
            Key::Method
        } else if may_id && n == ID.len() {
            Key::Id
        } else {
            Key::Other
        })
    }

    /// After a backslash: the escaped character (a `\u` surrogate pair read as one).
    fn escape(&mut self) -> Result<u32, Malformed> {
        Ok(match self.next()? {
            b'"' => u32::from(b'"'),
            b'\\' => u32::from(b'\\'),
            b'/' => u32::from(b'/'),
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => u32::from(b'\n'),
            b'r' => u32::from(b'\r'),
            b't' => u32::from(b'\t'),
            b'u' => match self.hex4()? {
                // A UTF-16 surrogate pair stands for one character; a lone half is not
                // text, and JSON parsers refuse it (found by the `jsonrpc` fuzz target).
                high @ 0xD800..=0xDBFF => {
                    self.expect(b'\\')?;
                    self.expect(b'u')?;
                    match self.hex4()? {
                        low @ 0xDC00..=0xDFFF => 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00),
                        _ => return Err(Malformed),
                    }
                }
                0xDC00..=0xDFFF => return Err(Malformed),
                unit => unit,
            },
            _ => return Err(Malformed),
        })
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u32, Malformed> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = char::from(self.next()?).to_digit(16).ok_or(Malformed)?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// Skips one value at `depth` (the top-level object is depth 0).
    fn value(&mut self, depth: usize) -> Result<(), Malformed> {
        if depth > MAX_DEPTH {
            return Err(Malformed);
        }
        match self.peek().ok_or(Malformed)? {
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.key()?;
                    self.ws();
                    self.expect(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        b'}' => return Ok(()),
                        _ => return Err(Malformed),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        b']' => return Ok(()),
                        _ => return Err(Malformed),
                    }
                }
            }
            b'"' => self.key().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Malformed),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Malformed> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Malformed)
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<(), Malformed> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return Err(Malformed),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Result<(), Malformed> {
        if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Err(Malformed);
        }
        self.digits();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a JSON parser concludes: passes when the body parses and holds only objects
    /// that are not requests.
    fn reference(json: &str) -> bool {
        let is_request = |m: &serde_json::Value| {
            m.as_object()
                .is_none_or(|o| o.contains_key("method") && o.contains_key("id"))
        };
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::Array(batch)) => {
                !batch.is_empty() && !batch.iter().any(is_request)
            }
            Ok(m @ serde_json::Value::Object(_)) => !is_request(&m),
            _ => false,
        }
    }

    #[test]
    fn the_scanner_agrees_with_a_json_parser() {
        let cases = [
            // answers and notifications pass
            r#"{"jsonrpc":"2.0","id":7,"result":{"roots":[{"uri":"file:///w"}]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
            r#" [ {"jsonrpc":"2.0","id":1,"result":{}} , {"jsonrpc":"2.0","method":"n"} ] "#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no \"id\" here"}}"#,
            r#"{"params":{"id":1,"method":"nested, not top level"},"method":"n"}"#,
            r#"{}"#,
            r#"{"id":null,"result":[1,-2.5e+3,0.0,true,false,null,"\u00e9\ud83d\ude00"]}"#,
            // requests do not
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"method":"tools/call","id":null}"#,
            r#"{"\u006dethod":"x","\u0069\u0064":1}"#,
            r#"{"me\u0074hod":"x","i\u0064":"a"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
            // look-alike keys are other keys
            r#"{"methods":"x","id":1}"#,
            r#"{"metho":"x","id":1}"#,
            r#"{"method":"x","idd":1}"#,
            r#"{"method\u0000":"x","id":1}"#,
            r#"{"méthod":"x","id":1}"#,
            // not objects, or not JSON: refused
            r#"[]"#,
            r#"[1,2,3]"#,
            r#"[{"id":1,"result":{}},0]"#,
            r#"0"#,
            r#""method""#,
            r#"{"id":1,"result":{}"#,
            r#"{"id":1,"result":{}} x"#,
            r#"{"id":01,"result":{}}"#,
            r#"{"id":1.,"result":{}}"#,
            r#"{"id":-,"result":{}}"#,
            r#"{"id":1,"result":tru}"#,
            r#"{"id":1,"result":"\x"}"#,
            r#"{"id":1,"result":"tab	inside"}"#,
            r#"{"id":1,,"result":{}}"#,
            r#"{"id":1,"result":[1,]}"#,
            r#"{"id" 1}"#,
            "",
            // half a surrogate pair is not text (found by fuzzing)
            r#"{"id":1,"result":"\ud83d"}"#,
            r#"{"id":1,"result":"\ud83dx"}"#,
            r#"{"id":1,"result":"\ude00\ud83d"}"#,
            r#"{"id":1,"result":"\ud83d\u0041"}"#,
        ];
        for json in cases {
            assert_eq!(
                only_answers_and_notifications(json.as_bytes()),
                reference(json),
                "{json}"
            );
        }
        // Bytes that are not UTF-8 are not JSON text (found by fuzzing).
        assert!(!only_answers_and_notifications(
            b"{\"id\":1,\"result\":\"\xff\"}"
        ));
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let deep = format!(
            "{{\"id\":1,\"result\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(!only_answers_and_notifications(deep.as_bytes()));
        let fine = format!(
            "{{\"id\":1,\"result\":{}{}}}",
            "[".repeat(100),
            "]".repeat(100)
        );
        assert!(only_answers_and_notifications(fine.as_bytes()));
    }

    #[test]
    fn a_huge_array_of_numbers_is_scanned_without_a_tree() {
        // The review's body: what a parser turns into ~1 GiB is walked in place.
        let mut body = b"{\"id\":1,\"result\":[".to_vec();
        body.extend(b"0,".repeat(1 << 20));
        body.extend(b"0]}");
        assert!(only_answers_and_notifications(&body));
        assert!(!only_answers_and_notifications(&body[..body.len() - 1]));
    }

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let limits = BodyLimits::new(100, None, 150);
        let a = limits.admit(Some(100)).unwrap();
        assert_eq!(limits.budget().used(), 100);
        // A second declared 100 does not fit in what is left; a declared 101 is too large.
        let refused = limits.admit(Some(100)).unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.setting, Some("http.max_buffered_mib"));
        let refused = limits.admit(Some(101)).unwrap_err();
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        // An undeclared length reserves as it is read.
        let b = limits.admit(None).unwrap();
        assert!(b.grow_to(50));
        assert!(!b.grow_to(51));
        assert_eq!(limits.budget().used(), 150);
        drop(a);
        assert!(b.grow_to(100));
        drop(b);
        assert_eq!(limits.budget().used(), 0);
    }

    async fn read(limits: &BodyLimits, body: Body) -> (Result<Bytes, ()>, Option<BodyFailure>) {
        let reservation = limits.admit(None).unwrap();
        let (body, failure) = limits.wrap(body, reservation);
        let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|_| ());
        (bytes, failure.get().copied())
    }

    #[tokio::test]
    async fn bodies_are_cut_at_the_size_limit_and_the_deadline() {
        let limits = BodyLimits::new(10, Some(Duration::from_millis(200)), 1000);
        let (ok, failure) = read(&limits, Body::from("0123456789")).await;
        assert_eq!(ok.unwrap(), "0123456789");
        assert_eq!(failure, None);
        assert_eq!(limits.budget().used(), 0);

        let (too_big, failure) = read(&limits, Body::from("0123456789x")).await;
        assert!(too_big.is_err());
        assert_eq!(failure, Some(BodyFailure::TooLarge));

        // One byte, then nothing: the deadline ends it.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
        tx.send(Ok(Frame::data(Bytes::from_static(b"{"))))
            .await
            .unwrap();
        let slow = Body::new(http_body_util_stream(rx));
        let started = std::time::Instant::now();
        let (late, failure) = read(&limits, slow).await;
        assert!(late.is_err());
        assert_eq!(failure, Some(BodyFailure::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(tx);
        assert_eq!(limits.budget().used(), 0);
    }

    /// A body fed from a channel (a client sending slowly).
    fn http_body_util_stream(
        rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
    ) -> impl http_body::Body<Data = Bytes, Error = std::io::Error> + Send + 'static {
        struct Channel(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);
        impl http_body::Body for Channel {
            type Data = Bytes;
            type Error = std::io::Error;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
                self.0.poll_recv(cx)
            }
        }
        Channel(rx)
    }
}
