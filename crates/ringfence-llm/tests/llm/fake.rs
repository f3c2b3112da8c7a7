//! A scripted stand-in for a model API on loopback: a minimal HTTP/1.1 server that records
//! every request it reads (method, path, headers, body) and answers each with the next reply
//! of its script, so a test checks both what the client sent and what it made of the answer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request as the fake read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Names lower-cased, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    /// The value of header `name` (lower-case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (every request of these APIs is).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How long to wait before answering.
    pub delay: Duration,
}

impl Reply {
    /// `status` with `body` as JSON.
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply::raw(status, "application/json", body.to_string().as_bytes())
    }

    /// `status` with `body` as it is, labelled `content_type`.
    pub fn raw(status: u16, content_type: &str, body: &[u8]) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.to_vec(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

/// A running fake.
pub struct Fake {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// Serves `script` in order, one reply per request; a request beyond the script is
    /// answered 599, which no test expects.
    pub async fn start(script: Vec<Reply>) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (log, script) = (log.clone(), script.clone());
                tokio::spawn(async move {
                    let _ = connection(conn, log, script).await;
                });
            }
        });
        Fake { url, seen }
    }

    /// Every request so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads and answers requests on one (keep-alive) connection until the client closes it.
async fn connection(
    mut conn: TcpStream,
    log: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let end_of_head = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            if !fill(&mut conn, &mut buf).await? {
                return Ok(());
            }
        };
        let head = String::from_utf8_lossy(&buf[..end_of_head]).into_owned();
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or_default().split_whitespace();
        let method = start.next().unwrap_or_default().to_owned();
        let path = start.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < end_of_head + length {
            if !fill(&mut conn, &mut buf).await? {
                return Ok(());
            }
        }
        let body = buf[end_of_head..end_of_head + length].to_vec();
        buf.drain(..end_of_head + length);
        log.lock().unwrap().push(Seen {
            method,
            path,
            headers,
            body,
        });
        let reply = script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Reply::raw(599, "text/plain", b"the script has run out"));
        tokio::time::sleep(reply.delay).await;
        let mut out = format!(
            "HTTP/1.1 {} Scripted\r\ncontent-length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&reply.body);
        conn.write_all(&bytes).await?;
    }
}

/// Reads more of the connection into `buf`; `false` once the peer has closed it.
async fn fill(conn: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 8192];
    let n = conn.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}
