//! PostgreSQL: the store several ringfence instances share (`[store] backend = "postgres"`).
//!
//! [`Pg`] is a pool of connections to one database. The stores call it from ordinary
//! threads (tool calls run their blocking work in place, the scheduler has its own thread),
//! the same way they call SQLite: [`Pg::run`] lends a connection to an async closure and
//! blocks until it is done. The connections' sockets are driven by a small private tokio
//! runtime, never the caller's, so a call works from any thread, inside an async runtime
//! or not, and cannot starve the server's own workers.
//!
//! Schemas are versioned per family in the table `ringfence_schema`, with the same numbering
//! as the family's SQLite file (step *n* of both makes the same tables), and migrated at
//! start under an advisory lock, so instances starting together migrate once.
//!
//! TLS: `sslmode=disable|prefer|require` in the URL as libpq reads it (`prefer` is the
//! default); whenever TLS is used the server's certificate is verified — against the
//! public web roots, or only against `ca_file` when one is given — and its name must match
//! the host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::{Schema, StoreError};

pub mod audit;
pub mod copy;
pub mod credentials;
pub mod scratch;
pub mod sessions;

pub use tokio_postgres;
pub use tokio_postgres::Error as PgError;
pub use tokio_postgres::types::ToSql;
pub use tokio_postgres::{GenericClient, Row, Transaction};

/// How to reach the database.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?sslmode=...` (or libpq's `key=value`
    /// form).
    pub url: String,
    /// Connections kept at most (each a server process on the PostgreSQL side).
    pub pool_size: usize,
    /// PEM file of the certificate authorities to trust instead of the public web roots.
    pub ca_file: Option<PathBuf>,
    /// How long to wait for a connection: to open one, or for a busy pool to free one.
    pub connect_timeout: Duration,
    /// The longest one statement may run (PostgreSQL's `statement_timeout`, set on each
    /// connection) before the server cancels it, so a stuck database fails calls instead of
    /// holding them; `None`: no limit (or the server's own setting).
    pub statement_timeout: Option<Duration>,
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> PgOptions {
        PgOptions {
            url: url.into(),
            pool_size: 16,
            ca_file: None,
            connect_timeout: Duration::from_secs(10),
            statement_timeout: Some(Duration::from_secs(60)),
        }
    }
}

/// A pool of connections to one PostgreSQL database (cheap to clone).
#[derive(Clone)]
pub struct Pg {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("database", &self.inner.shown)
            .finish()
    }
}

struct Inner {
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// Drives the connections; shut down in the background on drop (a runtime may not be
    /// dropped inside another's worker, where the last `Pg` may go).
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Mutex<Slots>,
    freed: Condvar,
    size: usize,
    wait: Duration,
    /// The database as messages name it: user@host:port/database, never the password.
    shown: String,
    /// Set on each new connection (`SET statement_timeout`, which poolers like PgBouncer
    /// accept where startup options are refused).
    statement_timeout: Option<Duration>,
}

/// A pooled connection and the statements prepared on it.
struct Conn {
    client: Client,
    /// By their SQL (see [`Pg::run_prepared`]).
    prepared: HashMap<&'static str, tokio_postgres::Statement>,
}

struct Slots {
    idle: Vec<Conn>,
    /// Connections open or being opened, idle or lent.
    open: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Pg {
    /// Checks the options and opens one connection (so a wrong URL, password or certificate
    /// stops the start with the reason); more open as calls need them.
    pub fn connect(options: &PgOptions) -> Result<Pg, StoreError> {
        let config = tokio_postgres::Config::from_str(&options.url).map_err(|e| {
            StoreError::PgOptions(format!("store.url is not a PostgreSQL URL: {e}"))
        })?;
        if config.get_dbname().is_none() {
            return Err(StoreError::PgOptions(
                "store.url names no database: end it with /<database>".into(),
            ));
        }
        if options.pool_size == 0 {
            return Err(StoreError::PgOptions(
                "store.pool_size must be at least 1".into(),
            ));
        }
        let tls = tls(options.ca_file.as_deref())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ringfence-pg")
            .enable_all()
            .build()
            .map_err(|e| {
                StoreError::PgOptions(format!("cannot start the PostgreSQL driver: {e}"))
            })?;
        let mut config = config;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("ringfence");
        }

        let shown = shown(&config);
        let pg = Pg {
            inner: Arc::new(Inner {
                handle: runtime.handle().clone(),
                runtime: Some(runtime),
                config,
                tls,
                pool: Mutex::new(Slots {
                    idle: Vec::new(),
                    open: 0,
                }),
                freed: Condvar::new(),
                size: options.pool_size,
                wait: options.connect_timeout,
                shown,
                statement_timeout: options.statement_timeout,
            }),
        };
        let first = pg.checkout()?;
        drop(first);
        Ok(pg)
    }

    /// The database as messages name it (user@host:port/database).
    pub fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// Lends a connection to `work` and waits for it. A failure is returned as is (the
    /// transaction `work` opened, if any, is rolled back); a connection that broke is not
    /// reused.
    pub fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut lent = self.checkout()?;
        let conn = lent.conn.as_mut().expect("a lent connection");
        futures_executor::block_on(work(&mut conn.client))
    }

    /// [`run`](Self::run) with `sql` prepared once per connection and kept: each later use
    /// is one round trip (no parse and describe first) and no planning from scratch — for
    /// the statements of every tool call. A statement the schema changed under (another
    /// instance migrated) is prepared again once.
    pub fn run_prepared<T>(
        &self,
        sql: &'static str,
        mut work: impl AsyncFnMut(&Client, &tokio_postgres::Statement) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut lent = self.checkout()?;
        let conn = lent.conn.as_mut().expect("a lent connection");
        futures_executor::block_on(async {
            let mut retried = false;
            loop {
                let statement = match conn.prepared.get(sql) {
                    Some(s) => s.clone(),
                    None => {
                        let s = conn.client.prepare(sql).await?;
                        conn.prepared.insert(sql, s.clone());
                        s
                    }
                };
                match work(&conn.client, &statement).await {
                    Err(StoreError::Postgres(e))
                        if !retried
                            && e.code()
                                == Some(
                                    &tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED,
                                ) =>
                    {
                        // "cached plan must not change result type"
                        conn.prepared.remove(sql);
                        retried = true;
                    }
                    other => return other,
                }
            }
        })
    }

    /// [`run`](Self::run) in one transaction, committed when `work` succeeds. A
    /// serialization failure or deadlock (which PostgreSQL asks the client to retry) runs
    /// `work` again, up to 5 times.
    pub fn transaction<T>(
        &self,
        mut work: impl AsyncFnMut(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let outcome = self.run(async |c| {
                let tx = c.transaction().await?;
                let value = work(&tx).await?;
                tx.commit().await?;
                Ok(value)
            });
            match outcome {
                Err(StoreError::Postgres(e)) if tries < 5 && retryable(&e) => {
                    tracing::debug!(error = %e, tries, "retrying a transaction");
                    std::thread::sleep(Duration::from_millis(5 * tries));
                }
                other => return other,
            }
        }
    }

    /// Migrates `schema` forward: each missing step in its own transaction, under an
    /// advisory lock that instances starting together share. A database a newer ringfence
    /// migrated is refused rather than misread. Returns the version it is at.
    pub fn migrate(&self, schema: &'static Schema) -> Result<usize, StoreError> {
        let known = schema.migrations.len();
        loop {
            let step = self.run(async |c| {
                let tx = c.transaction().await?;
                tx.batch_execute(
                    "SELECT pg_advisory_xact_lock(7386718293);
                     CREATE TABLE IF NOT EXISTS ringfence_schema (
                         name TEXT PRIMARY KEY,
                         version INTEGER NOT NULL
                     );",
                )
                .await?;
                let current: i32 = tx
                    .query_opt(
                        "SELECT version FROM ringfence_schema WHERE name = $1",
                        &[&schema.name],
                    )
                    .await?
                    .map_or(0, |r| r.get(0));
                let current = current as usize;
                if current > known {
                    return Err(StoreError::PgNewerSchema {
                        database: schema.name,
                        found: current,
                        known,
                    });
                }
                if current == known {
                    return Ok(None);
                }
                let version = current + 1;
                let applied = async {
                    tx.batch_execute(schema.migrations[current]).await?;
                    tx.execute(
                        "INSERT INTO ringfence_schema (name, version) VALUES ($1, $2)
                         ON CONFLICT (name) DO UPDATE SET version = excluded.version",
                        &[&schema.name, &(version as i32)],
                    )
                    .await?;
                    tx.commit().await
                };
                applied.await.map_err(|source| StoreError::PgMigration {
                    database: schema.name,
                    version,
                    source,
                })?;
                Ok(Some(version))
            })?;
            match step {
                Some(version) => {
                    tracing::info!(
                        database = schema.name,
                        version,
                        "PostgreSQL schema migrated"
                    )
                }
                None => return Ok(known),
            }
        }
    }

    /// The version `schema`'s tables are at in this database (0: none yet).
    pub fn schema_version(&self, name: &str) -> Result<usize, StoreError> {
        self.run(async |c| {
            let exists: bool = c
                .query_one("SELECT to_regclass('ringfence_schema') IS NOT NULL", &[])
                .await?
                .get(0);
            if !exists {
                return Ok(0);
            }
            let v: Option<i32> = c
                .query_opt(
                    "SELECT version FROM ringfence_schema WHERE name = $1",
                    &[&name],
                )
                .await?
                .map(|r| r.get(0));
            Ok(v.unwrap_or(0) as usize)
        })
    }

    /// A connection: an idle one that is still open, a new one while the pool has room,
    /// else the first one freed within the wait.
    fn checkout(&self) -> Result<Lent<'_>, StoreError> {
        let inner = &*self.inner;
        let deadline = Instant::now() + inner.wait;
        let mut slots = inner.slots();
        loop {
            while let Some(conn) = slots.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(Lent {
                        pg: inner,
                        conn: Some(conn),
                    });
                }
                slots.open -= 1;
            }
            if slots.open < inner.size {
                slots.open += 1;
                drop(slots);
                return match self.open_connection() {
                    Ok(client) => Ok(Lent {
                        pg: inner,
                        conn: Some(Conn {
                            client,
                            prepared: HashMap::new(),
                        }),
                    }),
                    Err(e) => {
                        inner.slots().open -= 1;
                        inner.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StoreError::PgBusy {
                    database: inner.shown.clone(),
                    size: inner.size,
                    waited: inner.wait,
                });
            }
            slots = inner
                .freed
                .wait_timeout(slots, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn open_connection(&self) -> Result<Client, StoreError> {
        let inner = &*self.inner;
        let (config, tls, shown) = (inner.config.clone(), inner.tls.clone(), inner.shown.clone());
        let limit = inner.statement_timeout;
        let opening = inner.handle.spawn(async move {
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(database = %shown, error = %e, "a PostgreSQL connection ended");
                }
            });
            if let Some(limit) = limit {
                client
                    .batch_execute(&format!("SET statement_timeout = {}", limit.as_millis()))
                    .await?;
            }
            Ok::<_, PgError>(client)
        });
        match futures_executor::block_on(opening) {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(source)) => Err(StoreError::PgConnect {
                database: inner.shown.clone(),
                source,
            }),
            Err(e) => Err(StoreError::PgOptions(format!(
                "the PostgreSQL driver failed: {e}"
            ))),
        }
    }
}

impl Pg {
    /// Listens on `channel` (`LISTEN`) on a connection of its own, for as long as the pool
    /// lives: every notification's payload is sent to the returned channel's receivers, and
    /// an empty payload after each (re)connection says that notifications may have been
    /// missed meanwhile. A broken connection is opened again after a second.
    pub fn listen(&self, channel: &'static str) -> tokio::sync::broadcast::Sender<String> {
        let (tx, _) = tokio::sync::broadcast::channel(1024);
        let sender = tx.clone();
        // Weak: the task runs on the pool's own runtime, which the pool owns.
        let inner = Arc::downgrade(&self.inner);
        self.inner.handle.spawn(async move {
            loop {
                let Some(pool) = inner.upgrade() else { return };
                let (mut config, tls, shown) =
                    (pool.config.clone(), pool.tls.clone(), pool.shown.clone());
                drop(pool);
                // A connection that only listens sends nothing: keepalives tell a dead one.
                config.keepalives(true).keepalives_idle(Duration::from_secs(30));
                match listen_once(config, tls, channel, &sender).await {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::warn!(database = %shown, channel, error = %describe(&e), "PostgreSQL notifications interrupted; listening again in 1 s")
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        tx
    }
}

/// One connection's worth of listening (see [`Pg::listen`]): until it breaks.
async fn listen_once(
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    channel: &str,
    sender: &tokio::sync::broadcast::Sender<String>,
) -> Result<(), PgError> {
    use futures_util::StreamExt as _;
    let (client, mut connection) = config.connect(tls).await?;
    let forward = sender.clone();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    let _ = forward.send(n.payload().to_owned());
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    // (Re)connected: whatever was sent while no one listened must be looked for.
    let _ = sender.send(String::new());
    let ended = driver.await;
    drop(client);
    match ended {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

impl Inner {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection lent by the pool; given back (or, if it broke, forgotten) on drop.
struct Lent<'a> {
    pg: &'a Inner,
    conn: Option<Conn>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let mut slots = self.pg.slots();
        if conn.client.is_closed() {
            slots.open -= 1;
        } else {
            slots.idle.push(conn);
        }
        drop(slots);
        self.pg.freed.notify_one();
    }
}

/// A PostgreSQL error as messages show it: the server's own words (with its detail and
/// hint) when the server answered, else what failed on the way.
pub(crate) fn describe(e: &PgError) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                s.push_str("; ");
                s.push_str(detail);
            }
            if let Some(hint) = db.hint() {
                s.push_str("; hint: ");
                s.push_str(hint);
            }
            s
        }
        None => {
            // The driver's own words name only the step ("error performing TLS handshake");
            // the causes say what went wrong (an unknown issuer, a refused connection).
            let mut s = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let text = c.to_string();
                if !s.ends_with(&text) {
                    s.push_str(": ");
                    s.push_str(&text);
                }
                cause = c.source();
            }
            s
        }
    }
}

/// Whether PostgreSQL asks for the transaction to be tried again.
fn retryable(e: &PgError) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// user@host:port/database, for messages.
fn shown(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        config.get_user().unwrap_or("?"),
        config.get_dbname().unwrap_or("?")
    )
}

/// The TLS client settings: certificates verified against `ca_file` alone when given, else
/// the public web roots.
#[allow(clippy::disallowed_methods)] // the operator's CA file, not under a root
fn tls(ca_file: Option<&Path>) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let bad = |e: &dyn std::fmt::Display| {
                StoreError::PgOptions(format!("store.ca_file {}: {e}", path.display()))
            };
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| bad(&e))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(&e))?;
            if certs.is_empty() {
                return Err(bad(&"no PEM certificate in the file"));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(&e))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::PgOptions(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests;
