//! The scheduler: claims follow-ups as they fall due and delivers them through the user's
//! channels. It runs inside `ringfence serve` (a supervisor job) and as `ringfence
//! scheduler`; any number of them may share one data directory, since each follow-up is
//! claimed with a lease (see `crate::store`).
//!
//! A claimed follow-up whose user is in quiet hours is held until they end (no attempt is
//! counted). Otherwise it goes to every channel that serves the user at once; it is
//! delivered when at least one channel took it (the others' errors are logged), else it is
//! retried with exponential back-off (30 s, 1 min, 2 min, … at most 1 h) until
//! `max_attempts`, then marked failed with the last error.
//!
//! The `mcp` channel reaches the user's MCP sessions open in this process (registered in
//! [`LiveSessions`]). It counts only while one can be reached: a user served by nothing
//! else is not claimed at all until a session of theirs connects (what fell due meanwhile
//! is then delivered late, marked so), and the standalone scheduler, which has no
//! sessions, leaves such users to `serve`.

use std::sync::Arc;
use std::time::Duration;

use crate::store::{Claim, Deliverable, FollowupStore};
use crate::{Clock, DUE_URI, SystemClock};
use ringfence_core::live::{LiveSessions, Notice};
use ringfence_core::time::{format_in_zone, format_iso_ms};
use ringfence_llm::{ChatModel, ChatRequest, Message};
use serde_json::json;

use crate::settings::{Channel, ChannelKind, FollowupSettings};

/// Deliveries in flight at once (and follow-ups claimed at once).
const PARALLEL: usize = 16;
/// The longest wait between two looks at the database (other processes schedule too).
const MAX_IDLE: Duration = Duration::from_secs(1);

/// How long a follow-up waits when the only session that could take it went away between
/// its claim and its delivery (no attempt is counted).
const RECHECK: Duration = Duration::from_secs(5);
/// The `mcp` channel's answer when no session of the user would hear it (any more).
const NOBODY_LISTENING: &str = "no MCP session of this user is listening";

/// Whether channel `c` can carry `user`'s follow-ups now: it serves them, and for `mcp`, a
/// session of theirs is among the `connected`.
fn reaches(c: &Channel, user: &str, connected: &[String]) -> bool {
    c.serves(user) && (c.kind != ChannelKind::Mcp || connected.iter().any(|u| u == user))
}

/// Whose follow-ups may be delivered now: users with proactive messages on and a channel
/// that reaches them (`mcp` only while they are `connected` to this process).
fn deliverable(s: &FollowupSettings, connected: &[String]) -> Deliverable {
    let usable = |user: &str| {
        s.proactive_for(user) && s.channels.iter().any(|c| reaches(c, user, connected))
    };
    // Users named anywhere in the configuration, or connected; everyone else takes the
    // defaults.
    let mut named: Vec<String> = s.users.keys().cloned().collect();
    for c in &s.channels {
        named.extend(c.users.iter().flatten().cloned());
    }
    named.extend(connected.iter().cloned());
    named.sort();
    named.dedup();
    let default_usable = s.proactive
        && s.channels
            .iter()
            .any(|c| c.users.is_none() && c.kind != ChannelKind::Mcp);
    if default_usable {
        Deliverable::AllBut(named.into_iter().filter(|u| !usable(u)).collect())
    } else {
        Deliverable::Only(named.into_iter().filter(|u| usable(u)).collect())
    }
}

/// The longest the model may take to write a check-in before the context is sent as is.
pub const WRITER_TIMEOUT: Duration = Duration::from_secs(15);

pub struct Scheduler {
    db: Arc<dyn FollowupStore>,
    /// The configuration.
    settings: FollowupSettings,
    /// The configuration with each person's own choices over it, read again every round.
    current: std::sync::Mutex<Arc<FollowupSettings>>,
    /// Writes each check-in from its context (`[llm]` with an HTTP API), if configured.
    writer: Option<Arc<dyn ChatModel>>,
    /// Names this process in claims: host, pid and a random part.
    owner: String,
    http: reqwest::Client,
    /// This process's MCP sessions (`serve`); none for the standalone scheduler.
    live: Option<Arc<LiveSessions>>,
    clock: Arc<dyn Clock>,
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    pub delivered: usize,
    pub retried: usize,
    pub held: usize,
}

impl Scheduler {
    pub fn new(
        db: Arc<dyn FollowupStore>,
        settings: FollowupSettings,
        writer: Option<Arc<dyn ChatModel>>,
    ) -> Result<Scheduler, ringfence_net::ClientError> {
        // Writing comes before sending, within the claim: it must fit beside the slowest
        // channel, or a slow round could be claimed again and sent twice.
        let slowest = settings
            .channels
            .iter()
            .map(Channel::timeout)
            .max()
            .unwrap_or_default();
        let writer = match writer {
            Some(w) if slowest + WRITER_TIMEOUT >= settings.lease => {
                tracing::warn!(
                    lease_secs = settings.lease.as_secs(),
                    "follow-ups are sent with their context as written: lease_secs leaves no room for the model ({} s) beside the slowest channel ({} s)",
                    WRITER_TIMEOUT.as_secs(),
                    slowest.as_secs()
                );
                drop(w);
                None
            }
            w => w,
        };
        let http = ringfence_net::client(&ringfence_net::Outbound {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(300),
        })?;
        let host = host_name();
        let owner = format!(
            "{host}:{}:{}",
            std::process::id(),
            &blake3::hash(format!("{:?}", std::time::SystemTime::now()).as_bytes()).to_hex()[..8]
        );
        Ok(Scheduler {
            db,
            current: std::sync::Mutex::new(Arc::new(settings.clone())),
            settings,
            writer,
            owner,
            http,
            live: None,
            clock: Arc::new(SystemClock),
        })
    }

    /// Delivers through the `mcp` channel to the sessions registered in `live`.
    pub fn with_live(mut self, live: Option<Arc<LiveSessions>>) -> Scheduler {
        self.live = live;
        self
    }

    /// Tells the time by `clock` (tests jump it).
    #[cfg(test)]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Scheduler {
        self.clock = clock;
        self
    }

    /// The users with a session of this process that can be reached now.
    fn connected(&self) -> Vec<String> {
        self.live
            .as_ref()
            .map(|l| l.reachable_users(DUE_URI))
            .unwrap_or_default()
    }

    /// Whose follow-ups this process may deliver now.
    fn deliverable(&self) -> Deliverable {
        deliverable(&self.current(), &self.connected())
    }

    /// The settings in effect: the configuration with each person's own choices over it.
    fn current(&self) -> Arc<FollowupSettings> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the people's own choices again (a failure keeps the last ones, with a
    /// warning).
    fn refresh(&self) {
        let settings = match self.db.choices() {
            Ok(c) if c.is_empty() => self.settings.clone(),
            Ok(c) => self.settings.with_choices(&c),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the people's own delivery choices: the last ones read apply");
                return;
            }
        };
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
    }

    /// Runs until `stop` says so, each round then a sleep until the next follow-up is ready
    /// (at most [`MAX_IDLE`]).
    pub fn run_blocking(self: &Arc<Self>, stop: &dyn Fn(Duration) -> bool) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "the follow-up scheduler cannot start");
                return;
            }
        };
        tracing::info!(owner = %self.owner, "follow-up scheduler running");
        loop {
            match rt.block_on(self.round()) {
                Ok(r) if r != Round::default() => tracing::info!(
                    delivered = r.delivered,
                    retried = r.retried,
                    held = r.held,
                    "follow-ups"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "follow-up scheduler round failed"),
            }
            let next = self.db.next_ready_ms(&self.deliverable()).ok().flatten();
            let now = self.clock.now_ms();
            let wait = next
                .map(|t| {
                    Duration::from_millis((t - now).clamp(0, MAX_IDLE.as_millis() as i64) as u64)
                })
                .unwrap_or(MAX_IDLE);
            if stop(wait.max(Duration::from_millis(10))) {
                return;
            }
        }
    }

    /// One round: claim what is due now and deliver it, [`PARALLEL`] claims at a time —
    /// each batch claimed only when it can start at once, at the time it is claimed, so a
    /// lease never runs out while its follow-up waits its turn. Returns when nothing due is
    /// left to claim.
    pub async fn round(self: &Arc<Self>) -> Result<Round, ringfence_store::StoreError> {
        let mut total = Round::default();
        self.refresh();
        let deliverable = self.deliverable();
        loop {
            let now_ms = self.clock.now_ms();
            let claims = self.db.claim_due(
                &self.owner,
                now_ms,
                self.settings.lease.as_millis() as i64,
                PARALLEL,
                &deliverable,
                self.settings.max_attempts,
            )?;
            let n = claims.len();
            let mut running = tokio::task::JoinSet::new();
            for c in claims {
                let me = self.clone();
                running.spawn(async move { me.settle(c, now_ms).await });
            }
            while let Some(r) = running.join_next().await {
                let r = r.unwrap_or_default();
                total.delivered += r.delivered;
                total.retried += r.retried;
                total.held += r.held;
            }
            if n < PARALLEL {
                return Ok(total);
            }
        }
    }

    async fn settle(&self, c: Claim, now_ms: i64) -> Round {
        let settings = self.current();
        let user = settings.users.get(&c.user);
        let (zone_name, zone) = settings.zone_of(&c.user);
        if let Some(q) = settings.quiet_hours_of(&c.user) {
            let until = q.next_allowed(now_ms, &zone);
            if until != now_ms {
                let _ = self.db.hold(c.row, &self.owner, until, now_ms);
                return Round {
                    held: 1,
                    ..Round::default()
                };
            }
        }
        let message = self.message(&c, &zone).await;
        let doc = document(
            Delivery {
                id: c.number,
                user: &c.user,
                context: &c.context,
                due_ms: c.due_ms,
                attempt: c.attempt,
                key: &c.idempotency_key,
            },
            &message,
            (&zone_name, &zone),
            now_ms,
        );
        let body = serde_json::to_vec(&doc).unwrap_or_default();
        // Every channel that serves the user; `mcp` answers NOBODY_LISTENING when no
        // session of theirs would hear it (now, or in this process at all).
        let channels: Vec<Channel> = self
            .settings
            .channels
            .iter()
            .filter(|ch| ch.serves(&c.user))
            .cloned()
            .collect();
        // Every channel at once.
        let mut sending = tokio::task::JoinSet::new();
        let address = user.and_then(|u| u.email.clone());
        for ch in channels {
            let (http, body, key) = (self.http.clone(), body.clone(), c.idempotency_key.clone());
            let (doc, address, live) = (doc.clone(), address.clone(), self.live.clone());
            let to = Recipient {
                user: c.user.clone(),
                address,
                live,
            };
            sending.spawn(async move {
                let r = deliver(&http, &ch, &doc, &body, &key, &to).await;
                (ch.name(), r)
            });
        }
        let mut via = Vec::new();
        let mut errors = Vec::new();
        while let Some(done) = sending.join_next().await {
            match done {
                Ok((name, Ok(()))) => via.push(name),
                Ok((name, Err(e))) => errors.push(format!("{name}: {e}")),
                Err(e) => errors.push(format!("a delivery task failed: {e}")),
            }
        }
        via.sort_unstable();
        errors.sort();
        let done = self.clock.now_ms();
        let nobody = |e: &String| e.ends_with(NOBODY_LISTENING);
        if via.is_empty() && !errors.is_empty() && errors.iter().all(nobody) {
            // The only sessions that could hear it went away since the claim: no attempt
            // is counted; it waits for one.
            let _ = self
                .db
                .hold(c.row, &self.owner, done + RECHECK.as_millis() as i64, done);
            return Round {
                held: 1,
                ..Round::default()
            };
        }
        // Nobody listening over mcp is no failure beside another channel's outcome.
        let failed: Vec<&str> = errors
            .iter()
            .filter(|e| !nobody(e))
            .map(String::as_str)
            .collect();
        if !via.is_empty() {
            if !failed.is_empty() {
                tracing::warn!(user = %c.user, followup = c.number, errors = ?failed, "a follow-up channel failed");
            }
            match self.db.complete(c.row, &self.owner, &via.join(","), done) {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    user = %c.user,
                    followup = c.number,
                    "delivered after the claim expired: another process may deliver it again (same idempotency key)"
                ),
                Err(e) => tracing::warn!(error = %e, "cannot record a delivery"),
            }
            return Round {
                delivered: 1,
                ..Round::default()
            };
        }
        let error = if failed.is_empty() {
            "no delivery channel serves this user".to_owned()
        } else {
            failed.join("; ")
        };
        let _ = self.db.retry_or_fail(
            c.row,
            &self.owner,
            &error,
            done + backoff(c.attempt).as_millis() as i64,
            self.settings.max_attempts,
            done,
        );
        Round {
            retried: 1,
            ..Round::default()
        }
    }

    /// The check-in the user reads: written by the model from the context where one is
    /// configured, else (or if it fails or says nothing) the context itself.
    async fn message(&self, c: &Claim, zone: &ringfence_core::time::TimeZone) -> String {
        let Some(model) = &self.writer else {
            return c.context.clone();
        };
        let request = ChatRequest {
            system: "You are a personal assistant following up with your user, as you said you would. Write the check-in message itself: one to three short, warm sentences, addressed to the user, based only on the note you left yourself. No greeting line, no signature, no quotes.".to_owned(),
            messages: vec![Message::user(format!(
                "Your note: {}\nYou scheduled this for {}.",
                c.context,
                format_in_zone(c.due_ms, zone)
            ))],
            tools: Vec::new(),
            max_tokens: 200,
        };
        match tokio::time::timeout(WRITER_TIMEOUT, model.chat(request)).await {
            Ok(Ok(answer)) if !answer.text().trim().is_empty() => answer.text().trim().to_owned(),
            Ok(Ok(_)) => c.context.clone(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, model = %model.describe(), "the check-in could not be written; sending the context");
                c.context.clone()
            }
            Err(_) => {
                tracing::warn!(model = %model.describe(), "the model took too long to write a check-in; sending the context");
                c.context.clone()
            }
        }
    }
}

/// Whom a follow-up goes to: the user, their e-mail address if configured, and the MCP
/// sessions of this process.
struct Recipient {
    user: String,
    address: Option<String>,
    live: Option<Arc<LiveSessions>>,
}

/// Sends one follow-up through one channel: the document `doc` (serialised as `body`) and
/// its idempotency `key`.
async fn deliver(
    http: &reqwest::Client,
    ch: &Channel,
    doc: &serde_json::Value,
    body: &[u8],
    key: &str,
    to: &Recipient,
) -> Result<(), String> {
    match &ch.kind {
        ChannelKind::Webhook {
            url,
            secret,
            timeout,
        } => webhook(http, url, secret, *timeout, body, key).await,
        ChannelKind::Command { argv, timeout } => command(argv, *timeout, body).await,
        ChannelKind::Email(mail) => email(mail, to.address.as_deref(), doc, key).await,
        ChannelKind::Desktop { timeout } => desktop(doc, *timeout).await,
        ChannelKind::Mcp => {
            let live = to.live.as_ref().ok_or(NOBODY_LISTENING)?;
            let notice = Notice {
                user: to.user.clone(),
                from: crate::FAMILY,
                kind: "followup",
                message: doc["message"].as_str().unwrap_or_default().to_owned(),
                document: doc.clone(),
                resource: DUE_URI,
            };
            let told = live.tell(notice).await;
            if told.reachable == 0 {
                Err(NOBODY_LISTENING.into())
            } else if told.told == 0 {
                Err(format!(
                    "{} MCP session(s) of this user could not be sent it",
                    told.reachable
                ))
            } else {
                Ok(())
            }
        }
    }
}

/// What one delivery is of.
struct Delivery<'a> {
    id: i64,
    user: &'a str,
    context: &'a str,
    due_ms: i64,
    attempt: i64,
    key: &'a str,
}

/// The document every channel is sent for a delivery (a webhook's body, a command's stdin,
/// an MCP notice's data), with the check-in `message`, in the user's zone, sent at `now_ms`.
fn document(
    d: Delivery<'_>,
    message: &str,
    (zone_name, zone): (&str, &ringfence_core::time::TimeZone),
    now_ms: i64,
) -> serde_json::Value {
    json!({
        "id": d.id,
        "user": d.user,
        "context": d.context,
        "message": message,
        "scheduled_for": format_iso_ms(d.due_ms),
        "scheduled_for_local": format_in_zone(d.due_ms, zone),
        "timezone": zone_name,
        "delivered_at": format_iso_ms(now_ms),
        "late_by_seconds": ((now_ms - d.due_ms).max(0) as f64) / 1000.0,
        "attempt": d.attempt,
        "idempotency_key": d.key,
    })
}

/// Sends a test check-in to `user` through `settings.channels[index]` (which must serve
/// them), as the settings page's "Send a test" does: the document a delivery sends, with
/// `"test": true` and id 0, so a receiver can tell it apart. Nothing is stored. `Ok` names
/// the channel.
pub async fn send_test(
    settings: &FollowupSettings,
    user: &str,
    index: usize,
    live: Option<Arc<LiveSessions>>,
) -> Result<&'static str, String> {
    let ch = settings
        .channels
        .get(index)
        .filter(|c| c.serves(user))
        .ok_or("no such channel serves you")?;
    let http = ringfence_net::client(&ringfence_net::Outbound {
        connect_timeout: Duration::from_secs(10),
        timeout: Duration::from_secs(60),
    })
    .map_err(|e| e.to_string())?;
    let (zone_name, zone) = settings.zone_of(user);
    let now = ringfence_core::time::now_ms();
    let key = format!(
        "rf-test-{}",
        &blake3::hash(format!("{user}\0{now}\0{:?}", std::time::SystemTime::now()).as_bytes())
            .to_hex()[..32]
    );
    let mut doc = document(
        Delivery {
            id: 0,
            user,
            context: "a test from the settings page",
            due_ms: now,
            attempt: 1,
            key: &key,
        },
        "A test from your settings page: this is how your assistant's check-ins reach you.",
        (&zone_name, &zone),
        now,
    );
    doc["test"] = true.into();
    let body = serde_json::to_vec(&doc).unwrap_or_default();
    let to = Recipient {
        user: user.to_owned(),
        address: settings.users.get(user).and_then(|u| u.email.clone()),
        live,
    };
    tokio::time::timeout(
        ch.timeout() + Duration::from_secs(5),
        deliver(&http, ch, &doc, &body, &key, &to),
    )
    .await
    .map_err(|_| format!("no answer within {} s", ch.timeout().as_secs() + 5))??;
    Ok(ch.name())
}

/// `text` with every line break a CRLF: a lone CR or a lone LF becomes CR LF (a CR LF stays
/// one). SMTP ends lines with CR LF only, and a server that also takes a bare CR or LF as one
/// would read `\r.\r` in a body as the end of the data and the rest as new commands (SMTP
/// smuggling); with every break a CR LF, lettre's dot-stuffing covers every line.
fn crlf_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("\r\n");
            }
            '\n' => out.push_str("\r\n"),
            c => out.push(c),
        }
    }
    out
}

/// A mail to the channel's address or the user's: the check-in as subject and first
/// paragraph, the note and the times below, the idempotency key as Message-ID (so a mail
/// sent twice threads as one). The body's lines end in CR LF whatever the check-in (written
/// by a model) or a stored context holds ([`crlf_lines`]); the subject is the first line,
/// control characters made spaces.
async fn email(
    mail: &crate::settings::EmailChannel,
    user_address: Option<&str>,
    doc: &serde_json::Value,
    key: &str,
) -> Result<(), String> {
    use lettre::message::header::ContentType;
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
    let to = mail
        .to
        .as_deref()
        .or(user_address)
        .ok_or("no address for this user (followups.users.<name>.email)")?;
    let text = |k: &str| doc[k].as_str().unwrap_or_default().to_owned();
    let message = text("message");
    let first_line = message.split(['\r', '\n']).next().unwrap_or_default();
    let mut subject: String = first_line
        .chars()
        .take(70)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if subject.chars().count() < first_line.chars().count() {
        subject.push('…');
    }
    let body = crlf_lines(&format!(
        "{message}\n\n--\nYour follow-up, scheduled for {} ({}).\nNote: {}\n",
        text("scheduled_for_local"),
        text("timezone"),
        text("context")
    ));
    let email = lettre::Message::builder()
        .from(mail.from.parse().map_err(|e| format!("from: {e}"))?)
        .to(to.parse().map_err(|e| format!("to: {e}"))?)
        .subject(format!("Follow-up: {subject}"))
        .message_id(Some(format!("<{key}@ringfence.invalid>")))
        .header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| e.to_string())?;
    let builder = if mail.starttls {
        AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&mail.host)
            .map_err(|e| e.to_string())?
    } else {
        // Allowed by the configuration only for a server on loopback.
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&mail.host)
    };
    let mut builder = builder.port(mail.port).timeout(Some(mail.timeout));
    if let Some((user, password)) = &mail.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    builder
        .build()
        .send(email)
        .await
        .map(|_| ())
        .map_err(|e| format!("SMTP {}:{}: {e}", mail.host, mail.port))
}

/// Shows the follow-up on the desktop: the check-in as the title, the context as the body.
async fn desktop(doc: &serde_json::Value, timeout: Duration) -> Result<(), String> {
    let text = |k: &str| doc[k].as_str().unwrap_or_default().to_owned();
    let (title, body) = (text("message"), text("context"));
    let title = if title.is_empty() {
        body.clone()
    } else {
        title
    };
    let shown = tokio::task::spawn_blocking(move || crate::desktop::notify(&title, &body, timeout));
    // The exchange bounds itself; this bounds the wait for it whatever happens.
    tokio::time::timeout(timeout + Duration::from_secs(1), shown)
        .await
        .map_err(|_| format!("desktop notification: no answer within {timeout:?}"))?
        .map_err(|e| format!("the desktop notification task failed: {e}"))?
        .map(|_| ())
        .map_err(|e| format!("desktop notification: {e}"))
}

/// Whether the e-mail channel's server takes a connection, STARTTLS and the login, as a
/// delivery would (nothing is sent).
pub async fn probe_smtp(mail: &crate::settings::EmailChannel) -> ringfence_core::plug::Check {
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::{AsyncSmtpTransport, Tokio1Executor};
    use ringfence_core::plug::Check;
    let subject = format!("follow-up e-mail ({}:{})", mail.host, mail.port);
    let builder = if mail.starttls {
        match AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&mail.host) {
            Ok(b) => b,
            Err(e) => return Check::problem(subject, e.to_string(), "check smtp_host"),
        }
    } else {
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&mail.host)
    };
    let mut builder = builder.port(mail.port).timeout(Some(mail.timeout));
    if let Some((user, password)) = &mail.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    match builder.build::<Tokio1Executor>().test_connection().await {
        Ok(true) => Check::ok(subject, "the server took the connection and the login"),
        Ok(false) => Check::problem(
            subject,
            "the server did not answer as a mail server",
            "check smtp_host and smtp_port",
        ),
        Err(e) => Check::problem(
            subject,
            e.to_string(),
            "check smtp_host, smtp_port, username and the password's variable",
        ),
    }
}

/// The wait before attempt `attempt + 1`: 30 s doubled per attempt, at most an hour.
fn backoff(attempt: i64) -> Duration {
    let secs = 30u64.saturating_mul(1u64 << (attempt.clamp(1, 20) - 1) as u32);
    Duration::from_secs(secs.min(3600))
}

/// `sha256=<hex of HMAC-SHA256(secret, "<timestamp>." + body)>`: what the
/// `X-Ringfence-Signature` header carries, `timestamp` being the `X-Ringfence-Timestamp`
/// header (Unix seconds), so a receiver can refuse an old request replayed.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let tag = ring::hmac::sign(&key, &signed);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

async fn webhook(
    http: &reqwest::Client,
    url: &str,
    secret: &str,
    timeout: Duration,
    body: &[u8],
    key: &str,
) -> Result<(), String> {
    let timestamp = ringfence_core::time::now_ms() / 1000;
    let response = http
        .post(url)
        .timeout(timeout)
        .header("Content-Type", "application/json")
        .header("X-Ringfence-Timestamp", timestamp.to_string())
        .header("X-Ringfence-Signature", signature(secret, timestamp, body))
        .header("Idempotency-Key", key)
        .body(body.to_vec())
        .send()
        .await
        // Never the URL in the message: a chat webhook's path is its secret, and the message
        // reaches the model through list_followups.
        .map_err(|e| ringfence_net::error_chain(&e.without_url()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(format!("HTTP {status}: redirects are not followed"))
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// What a command channel's program gets of the server's environment: enough to reach the
/// user's desktop or a bot, nothing of ringfence's (webhook secrets, API keys).
const COMMAND_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// This machine's name, for the owner of a claimed follow-up.
fn host_name() -> String {
    #[cfg(unix)]
    {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".to_owned())
    }
}

/// Runs a command channel's program with the document on stdin, in a process group of its
/// own: it has delivered when it exits 0. Only its own exit is waited for (a background
/// child keeping stderr open does not hold the delivery), at most 4 KiB of its stderr is
/// kept, and at the timeout its whole group is killed (Windows: the program itself).
async fn command(argv: &[String], timeout: Duration, body: &[u8]) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(&argv[0]);
    child
        .args(&argv[1..])
        .env_clear()
        .envs(
            COMMAND_ENV
                .iter()
                .filter_map(|k| Some((*k, std::env::var_os(k)?))),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // In a process group of its own, so that what it starts is killed with it (Unix;
    // elsewhere only the program itself is killed).
    #[cfg(unix)]
    child.process_group(0);
    let mut child = child
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
    #[cfg(unix)]
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let kill_group = || {
        #[cfg(unix)]
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
        }
    };
    let mut stdin = child.stdin.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let body = body.to_vec();
    let run = async {
        // A program that does not read its stdin must not block the delivery: the write
        // is abandoned when the program exits.
        let feed = async {
            let _ = stdin.write_all(&body).await;
            let _ = stdin.shutdown().await;
            drop(stdin);
            std::future::pending::<()>().await
        };
        let mut said = Vec::new();
        let read = async {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if said.len() < 4096 {
                    said.extend_from_slice(&buf[..n.min(4096 - said.len())]);
                }
            }
            std::future::pending::<()>().await
        };
        let status = tokio::select! {
            s = child.wait() => s,
            _ = feed => unreachable!("never ends"),
            _ = read => unreachable!("never ends"),
        };
        (status, said)
    };
    let outcome = tokio::time::timeout(timeout, run).await;
    // Whatever the program left behind goes with it.
    kill_group();
    match outcome {
        Err(_) => Err(format!(
            "{} did not finish within {} s and was killed",
            argv[0],
            timeout.as_secs()
        )),
        Ok((Err(e), _)) => Err(format!("{}: {e}", argv[0])),
        Ok((Ok(status), _)) if status.success() => Ok(()),
        Ok((Ok(status), said)) => {
            let said = String::from_utf8_lossy(&said);
            let said: String = said
                .trim()
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            Err(format!(
                "{} failed ({status}){}",
                argv[0],
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FollowupBackend;
    use ringfence_core::BoxFuture;
    use ringfence_core::live::NoticeSink;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicI64, Ordering};

    const MIN: i64 = 60_000;
    /// 2027-01-15T08:00:00Z: any fixed instant; the tests never read the machine's clock.
    const T0: i64 = 1_800_000_000_000;

    #[derive(Debug)]
    struct TestClock(AtomicI64);
    impl TestClock {
        fn set(&self, ms: i64) {
            self.0.store(ms, Ordering::SeqCst);
        }
    }
    impl Clock for TestClock {
        fn now_ms(&self) -> i64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn scheduler(
        toml: &str,
        dir: &std::path::Path,
    ) -> (
        Arc<crate::store::FollowupDb>,
        Arc<TestClock>,
        Arc<Scheduler>,
    ) {
        let settings =
            ringfence_core::plug::resolve_text(&crate::FollowupsPlug, toml, &[], dir).unwrap();
        let db = Arc::new(crate::store::FollowupDb::open(&dir.join("followups.db")).unwrap());
        let clock = Arc::new(TestClock(AtomicI64::new(T0)));
        let s = Scheduler::new(db.clone(), settings, None)
            .unwrap()
            .with_clock(clock.clone());
        (db, clock, Arc::new(s))
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // reads what the test's own command wrote
    fn clock_jumps_deliver_late_once_and_never_early() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("delivered.jsonl");
        let toml = format!(
            "[followups]\nproactive = true\ntimezone = \"UTC\"\n[[followups.channels]]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"cat >> '{0}'; echo >> '{0}'\"]\n",
            out.display()
        );
        let (db, clock, s) = scheduler(&toml, dir.path());
        db.schedule("alice", "soon", T0 + 10 * MIN, T0).unwrap();
        db.schedule("alice", "later", T0 + 120 * MIN, T0).unwrap();
        let rt = rt();
        let delivered = || -> Vec<(i64, f64)> {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            text.lines()
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    (
                        v["id"].as_i64().unwrap(),
                        v["late_by_seconds"].as_f64().unwrap(),
                    )
                })
                .collect()
        };
        let round = |at: i64| {
            clock.set(at);
            rt.block_on(s.round()).unwrap().delivered
        };
        assert_eq!(round(T0), 0, "nothing is due yet");
        // The clock jumps an hour ahead (a suspended laptop wakes): the first is delivered,
        // once, marked 50 minutes late; the second is not due yet.
        assert_eq!(round(T0 + 60 * MIN), 1);
        assert_eq!(delivered(), [(1, 3000.0)]);
        // It jumps back: nothing is delivered again, nothing early.
        assert_eq!(round(T0), 0);
        assert_eq!(round(T0 + 60 * MIN), 0);
        assert_eq!(round(T0 + 120 * MIN - 1), 0, "never early");
        assert_eq!(round(T0 + 120 * MIN), 1);
        assert_eq!(delivered(), [(1, 3000.0), (2, 0.0)]);
        // The next wait is the longest idle one: nothing is left.
        assert_eq!(db.next_ready_ms(&s.deliverable()).unwrap(), None);
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // reads what the test's own command wrote
    fn a_persons_own_choices_turn_delivery_on_hold_it_and_turn_it_off() {
        use crate::store::{Choices, FollowupStore};
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("delivered.jsonl");
        // Off for everyone in the configuration.
        let toml = format!(
            "[followups]\nproactive = false\ntimezone = \"UTC\"\n[[followups.channels]]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"cat >> '{0}'; echo >> '{0}'\"]\n",
            out.display()
        );
        let (db, clock, s) = scheduler(&toml, dir.path());
        db.schedule("alice", "for alice", T0 + MIN, T0).unwrap();
        db.schedule("bob", "for bob", T0 + MIN, T0).unwrap();
        let rt = rt();
        clock.set(T0 + 2 * MIN);
        assert_eq!(rt.block_on(s.round()).unwrap(), Round::default());
        // Alice turns hers on: only hers goes, at the next round.
        let on = Choices {
            proactive: Some(true),
            ..Choices::default()
        };
        db.set_choices("alice", &on, T0).unwrap();
        assert_eq!(rt.block_on(s.round()).unwrap().delivered, 1);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.contains("for alice") && !text.contains("for bob"),
            "{text}"
        );
        // Bob turns his on with quiet hours around now, in his own zone (UTC+9 at T0's
        // date: 2027-01-15 08:02 UTC is 17:02 in Tokyo): held, not delivered, no attempt.
        let quiet = Choices {
            proactive: Some(true),
            timezone: Some("Asia/Tokyo".into()),
            quiet_hours: Some("17:00-18:00".into()),
        };
        db.set_choices("bob", &quiet, T0).unwrap();
        let r = rt.block_on(s.round()).unwrap();
        assert_eq!((r.delivered, r.held), (0, 1), "{r:?}");
        let bob = db.list("bob", crate::ListFilter::Pending, 5).unwrap();
        assert_eq!(bob.followups[0].attempts, 0);
        // He drops his quiet hours: what they held goes at the next round, not at their end.
        let loud = Choices {
            quiet_hours: Some(String::new()),
            ..quiet.clone()
        };
        db.set_choices("bob", &loud, T0).unwrap();
        assert_eq!(rt.block_on(s.round()).unwrap().delivered, 1);
        assert!(std::fs::read_to_string(&out).unwrap().contains("for bob"));
        // He turns delivery off: his next one is not claimed, even long after it fell due.
        db.schedule("bob", "bob again", T0 + 3 * MIN, T0).unwrap();
        let off = Choices {
            proactive: Some(false),
            ..loud
        };
        db.set_choices("bob", &off, T0).unwrap();
        clock.set(T0 + 3 * 60 * MIN);
        assert_eq!(rt.block_on(s.round()).unwrap(), Round::default());
        assert_eq!(
            db.list("bob", crate::ListFilter::Pending, 5)
                .unwrap()
                .followups
                .len(),
            1
        );
    }

    #[test]
    fn an_operator_may_keep_the_choices_to_the_configuration() {
        use crate::store::Choices;
        let dir = tempfile::tempdir().unwrap();
        let settings = ringfence_core::plug::resolve_text(
            &crate::FollowupsPlug,
            "[followups]\nproactive = false\ntimezone = \"UTC\"\nuser_choices = false\n",
            &[],
            dir.path(),
        )
        .unwrap();
        let on = Choices {
            proactive: Some(true),
            timezone: Some("Asia/Tokyo".into()),
            quiet_hours: None,
        };
        let s = settings.with_choices(&[("alice".into(), on.clone())]);
        assert!(!s.proactive_for("alice"));
        assert_eq!(s.zone_of("alice").0, "UTC");
        let allowed = FollowupSettings {
            user_choices: true,
            ..settings
        }
        .with_choices(&[("alice".into(), on)]);
        assert!(allowed.proactive_for("alice") && !allowed.proactive_for("bob"));
        assert_eq!(allowed.zone_of("alice").0, "Asia/Tokyo");
    }

    /// An MCP session as the transport registers it, recording what it is told.
    #[derive(Default)]
    struct Session(Mutex<Vec<String>>);
    impl NoticeSink for Session {
        fn reachable(&self, _resource: &str) -> bool {
            true
        }
        fn tell(&self, notice: Arc<Notice>) -> BoxFuture<'static, bool> {
            self.0.lock().unwrap().push(notice.message.clone());
            Box::pin(async { true })
        }
    }

    #[test]
    fn the_mcp_channel_waits_for_a_connected_session() {
        let dir = tempfile::tempdir().unwrap();
        let (db, clock, s) = scheduler("[followups]\nproactive = true\n", dir.path());
        let live = Arc::new(LiveSessions::default());
        let s = Arc::new(
            Arc::try_unwrap(s)
                .ok()
                .unwrap()
                .with_live(Some(live.clone())),
        );
        db.schedule("alice", "ask about the interview", T0 + MIN, T0)
            .unwrap();
        clock.set(T0 + 5 * MIN);
        let rt = rt();
        // No session: not even claimed (no attempt, no hold), so nothing spins.
        assert_eq!(rt.block_on(s.round()).unwrap(), Round::default());
        assert_eq!(db.next_ready_ms(&s.deliverable()).unwrap(), None);
        let bob = Arc::new(Session::default());
        let _bob = live.register("bob", bob.clone());
        assert_eq!(rt.block_on(s.round()).unwrap(), Round::default());
        // Alice connects: it is delivered to her session, late.
        let alice = Arc::new(Session::default());
        let registration = live.register("alice", alice.clone());
        let r = rt.block_on(s.round()).unwrap();
        assert_eq!(r.delivered, 1);
        assert_eq!(*alice.0.lock().unwrap(), ["ask about the interview"]);
        assert!(bob.0.lock().unwrap().is_empty());
        drop(registration);
        let done = db.list("alice", crate::ListFilter::Completed, 5);
        assert_eq!(
            done.unwrap().followups[0].delivered_via.as_deref(),
            Some("mcp")
        );
    }

    /// An SMTP server on loopback for one session: records the commands and the raw bytes of
    /// DATA (up to the CR LF . CR LF that ends them), answering each with success.
    async fn one_smtp_session(listener: tokio::net::TcpListener) -> (Vec<String>, Vec<u8>) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        write.write_all(b"220 fake ESMTP\r\n").await.unwrap();
        let (mut commands, mut data) = (Vec::new(), Vec::new());
        loop {
            let mut line = Vec::new();
            if read.read_until(b'\n', &mut line).await.unwrap() == 0 {
                break;
            }
            let command = String::from_utf8_lossy(&line).trim_end().to_owned();
            let verb = command.to_ascii_uppercase();
            commands.push(command);
            let answer: &[u8] = if verb.starts_with("DATA") {
                write.write_all(b"354 go on\r\n").await.unwrap();
                while !data.ends_with(b"\r\n.\r\n") {
                    if read.read_until(b'\n', &mut data).await.unwrap() == 0 {
                        break;
                    }
                }
                b"250 queued\r\n"
            } else if verb.starts_with("QUIT") {
                write.write_all(b"221 bye\r\n").await.unwrap();
                break;
            } else {
                b"250 ok\r\n"
            };
            write.write_all(answer).await.unwrap();
        }
        (commands, data)
    }

    /// Issue 29: a lone CR reached SMTP DATA unchanged (`c\r.\rMAIL FROM:…`, the
    /// SMTP-smuggling pattern). A context stored before scheduling refused it (or a check-in
    /// a model wrote) reaches the server only as CR LF lines, the dot line stuffed.
    #[test]
    fn a_lone_cr_never_reaches_smtp_data() {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let toml = format!(
            "[followups]\nproactive = true\ntimezone = \"UTC\"\n[[followups.channels]]\nkind = \"email\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\nstarttls = false\nfrom = \"iris@example.org\"\n[followups.users.alice]\nemail = \"me@example.org\"\n"
        );
        let (db, clock, s) = scheduler(&toml, dir.path());
        db.schedule("alice", "c\r.\rMAIL FROM:<x>\nand\n.\nlf", T0 + MIN, T0)
            .unwrap();
        clock.set(T0 + 2 * MIN);
        let server = rt.spawn(one_smtp_session(listener));
        assert_eq!(rt.block_on(s.round()).unwrap().delivered, 1);
        let (commands, data) = rt.block_on(server).unwrap();
        let verbs: Vec<&str> = commands.iter().map(|c| &c[..4]).collect();
        assert_eq!(
            verbs,
            ["EHLO", "MAIL", "RCPT", "DATA", "QUIT"],
            "{commands:?}"
        );
        assert!(commands[1].starts_with("MAIL FROM:<iris@example.org>"));
        for (i, &b) in data.iter().enumerate() {
            let next = data.get(i + 1).copied();
            let prev = i.checked_sub(1).map(|p| data[p]);
            assert!(
                (b != b'\r' || next == Some(b'\n')) && (b != b'\n' || prev == Some(b'\r')),
                "a bare CR or LF at byte {i} of DATA: {:?}",
                String::from_utf8_lossy(&data)
            );
        }
        let text = String::from_utf8_lossy(&data);
        assert!(
            text.contains("\r\n\r\nc\r\n..\r\nMAIL FROM:<x>\r\nand\r\n..\r\nlf\r\n"),
            "{text:?}"
        );
        assert!(
            text.contains("\r\nNote: c\r\n..\r\nMAIL FROM:<x>\r\n"),
            "{text:?}"
        );
        assert!(text.contains("Subject: Follow-up: c\r\n"), "{text:?}");
    }

    #[test]
    fn crlf_lines_turns_every_lone_cr_and_lf_into_crlf() {
        assert_eq!(crlf_lines("a\rb\nc\r\nd\n\re"), "a\r\nb\r\nc\r\nd\r\n\r\ne");
        assert_eq!(crlf_lines("\r\r\n\n"), "\r\n\r\n\r\n");
    }

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        assert_eq!(backoff(1), Duration::from_secs(30));
        assert_eq!(backoff(2), Duration::from_secs(60));
        assert_eq!(backoff(5), Duration::from_secs(480));
        assert_eq!(backoff(12), Duration::from_secs(3600));
        assert_eq!(backoff(99), Duration::from_secs(3600));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_and_the_body() {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"Jefe");
        let expected: String = ring::hmac::sign(&key, b"1700000000.{\"id\":1}")
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let got = signature("Jefe", 1_700_000_000, b"{\"id\":1}");
        assert_eq!(got, format!("sha256={expected}"));
        // Another time, another signature: an old request cannot be replayed as new.
        assert_ne!(signature("Jefe", 1_700_000_001, b"{\"id\":1}"), got);
    }
}
