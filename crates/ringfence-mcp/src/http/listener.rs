//! The accept loop: HTTP/1.1 connections served by hyper, over TLS when configured, with
//! header and handshake timeouts, a lingering close (a refused upload is read and dropped for
//! a moment, so the client gets the refusal rather than a reset), and a graceful close of the
//! connections at the end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use hyper_util::server::graceful::GracefulShutdown;
use tokio_util::sync::CancellationToken;

/// Header read timeout: a client that does not finish its request headers is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// A TLS handshake that takes longer is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to close at the end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// After its last answer, how long a closing connection still reads (and drops) what the
/// client is sending.
const LINGER: Duration = Duration::from_secs(2);

/// Accepts connections in a task of its own until stopped.
pub(super) struct Acceptor {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<GracefulShutdown>,
}

/// The connections served, to close once nothing more is accepted.
pub(super) struct Connections(GracefulShutdown);

impl Acceptor {
    /// Serves `router` on every connection `listener` accepts (HTTPS with `tls`).
    pub(super) fn spawn(
        listener: tokio::net::TcpListener,
        router: axum::Router,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> Acceptor {
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        let graceful = GracefulShutdown::new();
        let stop = CancellationToken::new();
        let accept_stop = stop.clone();
        let task = tokio::spawn(async move {
            loop {
                let (stream, peer) = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of descriptors and the like: wait a moment rather than spin.
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                    _ = accept_stop.cancelled() => break,
                };
                let _ = stream.set_nodelay(true);
                // Each request knows the client's address (the settings page counts failed
                // sign-ins by it).
                let router = tower_layer::Layer::layer(
                    &axum::Extension(super::settings::Peer(peer)),
                    router.clone(),
                );
                match &tls {
                    None => {
                        let conn = http1().serve_connection(
                            hyper_util::rt::TokioIo::new(Lingering::new(stream)),
                            hyper_util::service::TowerToHyperService::new(router),
                        );
                        let conn = graceful.watch(conn);
                        tokio::spawn(async move {
                            if let Err(e) = conn.await {
                                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                            }
                        });
                    }
                    Some(acceptor) => {
                        let acceptor = acceptor.clone();
                        let watcher = graceful.watcher();
                        tokio::spawn(async move {
                            let stream = match tokio::time::timeout(
                                TLS_HANDSHAKE_TIMEOUT,
                                acceptor.accept(stream),
                            )
                            .await
                            {
                                Ok(Ok(s)) => s,
                                Ok(Err(e)) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "TLS handshake timed out");
                                    return;
                                }
                            };
                            let conn = http1().serve_connection(
                                hyper_util::rt::TokioIo::new(Lingering::new(stream)),
                                hyper_util::service::TowerToHyperService::new(router),
                            );
                            if let Err(e) = watcher.watch(conn).await {
                                tracing::debug!(%peer, error = %e, "HTTPS connection ended with an error");
                            }
                        });
                    }
                }
            }
            graceful
        });
        Acceptor { stop, task }
    }

    /// Stops accepting connections; those already open go on.
    pub(super) async fn stop(self) -> std::io::Result<Connections> {
        self.stop.cancel();
        let graceful = self.task.await.map_err(std::io::Error::other)?;
        Ok(Connections(graceful))
    }
}

impl Connections {
    /// Closes the connections once their current exchange is over, waiting 5 s at most.
    pub(super) async fn close(self) {
        if tokio::time::timeout(CLOSE_TIMEOUT, self.0.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some HTTP connections did not close within 5 s");
        }
    }
}

/// A connection that closes like a careful server does: it stops writing, then reads and
/// drops what the client still sends — a request body refused unread — until the client
/// closes too or [`LINGER`] passes. Closing at once with unread bytes would make the kernel
/// answer with a reset, and a client still uploading would lose the refusal it was sent.
struct Lingering<S> {
    inner: S,
    /// Set once closing began: when to stop reading.
    until: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Lingering<S> {
    fn new(inner: S) -> Lingering<S> {
        Lingering { inner, until: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lingering<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        use std::future::Future as _;
        let this = self.get_mut();
        if this.until.is_none() {
            match Pin::new(&mut this.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
            this.until = Some(Box::pin(tokio::time::sleep(LINGER)));
        }
        let Some(until) = this.until.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        // Polled first, so the deadline is registered with the timer and ends the linger even
        // for a client that never stops sending.
        if until.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(()));
        }
        let mut scratch = [0u8; 8192];
        for _ in 0..LINGER_READS_PER_POLL {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                // The client closed too (or the connection broke): done.
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                // Nothing more now: woken by the socket or the deadline.
                Poll::Pending => return Poll::Pending,
            }
        }
        // Still sending: give the worker back to other connections, and come again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Reads of 8 KiB one poll of a lingering close may make before it yields.
const LINGER_READS_PER_POLL: usize = 16;

fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Some(HEADER_TIMEOUT));
    b
}
