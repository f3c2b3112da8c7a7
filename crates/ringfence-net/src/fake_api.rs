//! For tests (feature `fake-api`): a tiny HTTP/1.1 server on loopback standing in for a
//! provider's API. It records every request (method, target, headers, body) and answers
//! what the test's handler says, so a test can check both what was sent and what came of
//! each answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path and query, as sent.
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON request body")
    }

    /// The query parameter `name`, decoded.
    pub fn query(&self, name: &str) -> Option<String> {
        let url = url::Url::parse(&format!("http://x{}", self.target)).unwrap();
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering (to trip a client timeout).
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    pub fn text(status: u16, body: &str) -> Reply {
        Reply::raw(status, "text/plain", body.as_bytes())
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

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&Request, usize) -> Reply + Send + Sync;

/// A running fake: its base URL and the requests it has seen.
pub struct FakeApi {
    pub url: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl FakeApi {
    /// Serves `handler(request, index of the request)` until the test ends.
    pub async fn start(
        handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static,
    ) -> FakeApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                let (log, handler) = (log.clone(), handler.clone());
                tokio::spawn(async move {
                    let _ = serve(conn, log, handler).await;
                });
            }
        });
        FakeApi { url, seen }
    }

    /// Serves `script` in order, one reply per request; a request beyond the script is
    /// answered 599, which no test expects.
    pub async fn scripted(script: Vec<Reply>) -> FakeApi {
        FakeApi::start(move |_, i| {
            script
                .get(i)
                .cloned()
                .unwrap_or_else(|| Reply::raw(599, "text/plain", b"the script has run out"))
        })
        .await
    }

    /// The requests seen so far.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection (keep-alive).
async fn serve(
    mut conn: tokio::net::TcpStream,
    log: Arc<Mutex<Vec<Request>>>,
    handler: Arc<Handler>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_owned();
        let target = first.next().unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = buf[head_end..head_end + length].to_vec();
        buf.drain(..head_end + length);
        let request = Request {
            method,
            target,
            headers,
            body,
        };
        let index = {
            let mut seen = log.lock().unwrap();
            seen.push(request.clone());
            seen.len() - 1
        };
        let reply = handler(&request, index);
        tokio::time::sleep(reply.delay).await;
        let mut out = format!(
            "HTTP/1.1 {} Fake\r\ncontent-length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (n, v) in &reply.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        conn.write_all(out.as_bytes()).await?;
        conn.write_all(&reply.body).await?;
    }
}
