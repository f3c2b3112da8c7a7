//! Test servers on loopback addresses that count every connection they accept, and a
//! resolver answering from a script (so a name can resolve differently the second time).

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfence_net::{AllowList, Guard, Resolve};
use ringfence_web::{FetchSettings, WebFetcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a test server answers to one request.
pub enum Reply {
    /// These bytes, then the connection is closed.
    Once(Vec<u8>),
    /// `head`, then `chunk` every `delay`, until the client goes away.
    Endless {
        head: Vec<u8>,
        chunk: Vec<u8>,
        delay: Duration,
    },
}

pub type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A listening server: how many connections it accepted, and the request lines it read.
pub struct Server {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
    pub fn request_lines(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// An HTTP response with a body.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    Reply::Once(bytes)
}

pub fn html(body: &str) -> Reply {
    response(
        "200 OK",
        &[("Content-Type", "text/html; charset=utf-8")],
        body.as_bytes(),
    )
}

pub fn redirect(status: &str, location: &str) -> Reply {
    response(status, &[("Location", location)], b"")
}

/// Starts a server on `ip:port` (port 0: any).
pub async fn serve(ip: IpAddr, port: u16, handler: Handler) -> std::io::Result<Server> {
    let listener = TcpListener::bind(SocketAddr::new(ip, port)).await?;
    let addr = listener.local_addr()?;
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (c, r) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            let (handler, r) = (handler.clone(), r.clone());
            tokio::spawn(answer(conn, handler, r));
        }
    });
    Ok(Server {
        addr,
        connections,
        requests,
    })
}

async fn answer(mut conn: TcpStream, handler: Handler, requests: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    requests
        .lock()
        .unwrap()
        .push(head.lines().next().unwrap_or("").to_owned());
    match handler(&head) {
        Reply::Once(bytes) => {
            let _ = conn.write_all(&bytes).await;
            let _ = conn.shutdown().await;
        }
        Reply::Endless { head, chunk, delay } => {
            if conn.write_all(&head).await.is_err() {
                return;
            }
            loop {
                if conn.write_all(&chunk).await.is_err() {
                    return;
                }
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

/// Servers on the same port of several loopback addresses (so one URL spelling per
/// address differs only in the host).
pub async fn serve_on_all(ips: &[&str], handler: Handler) -> (u16, Vec<Server>) {
    'again: for _ in 0..20 {
        let first = serve(ips[0].parse().unwrap(), 0, handler.clone())
            .await
            .unwrap();
        let port = first.addr.port();
        let mut servers = vec![first];
        for ip in &ips[1..] {
            match serve(ip.parse().unwrap(), port, handler.clone()).await {
                Ok(s) => servers.push(s),
                Err(_) => continue 'again,
            }
        }
        return (port, servers);
    }
    panic!("no port free on every address");
}

/// Per name: how many times it was asked, and its answers in turn.
type Answers = HashMap<String, (usize, Vec<Vec<IpAddr>>)>;

/// A resolver answering from a script: each name's answers in turn, the last repeating.
#[derive(Default, Clone)]
pub struct Script {
    answers: Arc<Mutex<Answers>>,
    pub asked: Arc<AtomicUsize>,
}

impl Script {
    pub fn answer(self, host: &str, answers: &[&[&str]]) -> Script {
        let parsed = answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.answers
            .lock()
            .unwrap()
            .insert(host.to_owned(), (0, parsed));
        self
    }
}

impl Resolve for Script {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let Some((turn, list)) = answers.get_mut(&host.to_ascii_lowercase()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such host (test resolver)",
            ));
        };
        let ips = list[(*turn).min(list.len() - 1)].clone();
        *turn += 1;
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

/// A fetcher with `allow` as its allow-list, the scripted resolver, and `settings`.
pub fn fetcher(allow: &[&str], script: &Script, settings: FetchSettings) -> WebFetcher {
    let guard = Guard::with_resolver(AllowList::parse(allow).unwrap(), Box::new(script.clone()));
    WebFetcher::new(settings, guard).unwrap()
}

/// Test settings: robots.txt off (so a request count is the page's alone), short timeouts.
pub fn quick() -> FetchSettings {
    FetchSettings {
        robots: false,
        connect_timeout: Duration::from_secs(3),
        timeout: Duration::from_secs(10),
        ..FetchSettings::default()
    }
}
