//! The family's section of the settings page, `/settings/followups`: the check-ins a
//! person's assistant scheduled — pending ones (cancel, reschedule) and past ones with their
//! status and delivery attempts — and how they reach this person: the channels, and the
//! person's own choices of whether they are delivered at all, in which time zone and outside
//! which quiet hours (kept in the follow-up store, over the configuration's; the scheduler
//! reads them every round).

use std::sync::Arc;

use ringfence_core::page::{
    Markup, Method, PAGE_ROWS, PageRequest, Reply, Section, html, pager_of, when,
};
use ringfence_core::time::{TimeZone, now_ms};

use ringfence_core::plug::Lazy;

use crate::settings::FollowupSettings;
use crate::store::{Choices, FollowupStore};
use crate::{ChangeOutcome, Followup, FollowupBackend, ListFilter, QuietHours, Status};

pub(crate) struct FollowupPage {
    pub(crate) backend: Arc<dyn FollowupBackend>,
    /// Where each person's own choices are kept.
    pub(crate) db: Arc<Lazy<dyn FollowupStore>>,
    /// The configuration's settings.
    pub(crate) settings: FollowupSettings,
    /// The sessions the `mcp` channel reaches (a test through it goes there).
    pub(crate) live: Option<Arc<ringfence_core::live::LiveSessions>>,
    /// When each user last sent a test (one a minute: each reaches a webhook, a mailbox).
    pub(crate) tested: std::sync::Mutex<std::collections::HashMap<String, i64>>,
}

/// A user's tests are at least this far apart.
const TEST_EVERY_MS: i64 = 60_000;

impl Section for FollowupPage {
    fn name(&self) -> &'static str {
        "followups"
    }

    fn title(&self) -> &'static str {
        "Follow-ups"
    }

    fn handle(&self, req: &PageRequest<'_>) -> Reply {
        let path = req.path();
        match (req.method, path.as_slice()) {
            (Method::Get, []) => self.list(req),
            (Method::Post, ["delivery"]) => self.choose(req),
            (Method::Post, ["test", index]) => self.send_test(req, index),
            (method, [id, action]) => {
                let Ok(id) = id.parse::<i64>() else {
                    return Reply::NotFound;
                };
                let Some(f) = (match self.find(req.user, id) {
                    Ok(f) => f,
                    Err(reply) => return reply,
                }) else {
                    return Reply::NotFound;
                };
                match (method, *action) {
                    (Method::Get, "cancel") => cancel_form(req, &f),
                    (Method::Post, "cancel") => self.cancel(req, &f),
                    (Method::Get, "reschedule") => self.reschedule_form(req, &f, None),
                    (Method::Post, "reschedule") => self.reschedule(req, &f),
                    _ => Reply::NotFound,
                }
            }
            _ => Reply::NotFound,
        }
    }
}

fn failed(e: impl std::fmt::Display) -> Reply {
    Reply::Failed(format!("the follow-up database: {e}"))
}

fn status_words(s: Status) -> &'static str {
    match s {
        Status::Pending => "pending",
        Status::Delivering => "being delivered",
        Status::Completed => "delivered",
        Status::Cancelled => "cancelled",
        Status::Failed => "failed",
    }
}

impl FollowupPage {
    fn zone(&self, user: &str) -> (String, TimeZone) {
        self.effective(user).zone_of(user)
    }

    /// The configuration with `user`'s own choices over it.
    fn effective(&self, user: &str) -> FollowupSettings {
        crate::plug::effective(&self.settings, &self.db, user)
    }

    /// `user`'s own choices (none made: all `None`).
    fn own(&self, user: &str) -> Result<Choices, Reply> {
        let db = self.db.get().map_err(failed)?;
        Ok(db.choices_of(user).map_err(failed)?.unwrap_or_default())
    }

    /// Keeps the person's choices from the form: each field empty follows the server.
    fn choose(&self, req: &PageRequest<'_>) -> Reply {
        if !self.settings.user_choices {
            return Reply::Invalid(
                "The server's operator sets how follow-ups reach you here ([followups] user_choices = false): nothing was changed.".into(),
            );
        }
        let proactive = match req.field("proactive").trim() {
            "" => None,
            "on" => Some(true),
            "off" => Some(false),
            other => {
                return Reply::Invalid(format!(
                    "Proactive messages `{other}`: choose On, Off, or as the server sets it."
                ));
            }
        };
        let timezone = match req.field("timezone").trim() {
            "" => None,
            name => {
                if name.len() > 64 || ringfence_core::time::zone(name).is_err() {
                    return Reply::Invalid(format!(
                        "The time zone `{}` is not known: give an IANA name such as Europe/Berlin or America/New_York, or leave it empty for the server's.",
                        name.chars().take(64).collect::<String>()
                    ));
                }
                Some(name.to_owned())
            }
        };
        let quiet_hours = match req.field("quiet_hours").trim() {
            "" => None,
            q if q.eq_ignore_ascii_case("none") => Some(String::new()),
            q => match QuietHours::parse(q) {
                Some(_) => Some(q.to_owned()),
                None => {
                    return Reply::Invalid(format!(
                        "Quiet hours `{}` do not read: write them as HH:MM-HH:MM, such as 22:00-07:00 (two different times), `none` for none, or leave them empty for the server's.",
                        q.chars().take(32).collect::<String>()
                    ));
                }
            },
        };
        let choices = Choices {
            proactive,
            timezone,
            quiet_hours,
        };
        let db = match self.db.get() {
            Ok(db) => db,
            Err(e) => return failed(e),
        };
        match db.set_choices(req.user, &choices, now_ms()) {
            Ok(()) => Reply::redirect(req.base, "Your delivery settings are saved."),
            Err(e) => failed(e),
        }
    }

    /// `user`'s follow-up `id`, whatever its status.
    fn find(&self, user: &str, id: i64) -> Result<Option<Followup>, Reply> {
        let all = self
            .backend
            .list(user, ListFilter::All, usize::MAX)
            .map_err(failed)?;
        Ok(all.followups.into_iter().find(|f| f.id == id))
    }

    fn list(&self, req: &PageRequest<'_>) -> Reply {
        // One listing (newest first), split: pending ones soonest first, the others as
        // listed.
        let all = match self.backend.list(req.user, ListFilter::All, usize::MAX) {
            Ok(all) => all.followups,
            Err(e) => return failed(e),
        };
        let (mut pending, past): (Vec<&Followup>, Vec<&Followup>) = all
            .iter()
            .partition(|f| matches!(f.status, Status::Pending | Status::Delivering));
        pending.sort_by_key(|f| (f.due_ms, f.id));
        // Each list a page at a time: pending ones soonest first, past ones newest first.
        let pending_total = pending.len();
        let pending_page = req
            .number("pending", 0)
            .min(pending_total.saturating_sub(1) / PAGE_ROWS);
        let pending = &pending[(pending_page * PAGE_ROWS).min(pending_total)
            ..((pending_page + 1) * PAGE_ROWS).min(pending_total)];
        let past_total = past.len();
        let page = req
            .number("page", 0)
            .min(past_total.saturating_sub(1) / PAGE_ROWS);
        let past =
            &past[(page * PAGE_ROWS).min(past_total)..((page + 1) * PAGE_ROWS).min(past_total)];
        let own = match self.own(req.user) {
            Ok(own) => own,
            Err(reply) => return reply,
        };
        let config = &self.settings;
        let s = &config.with_choices(&[(req.user.to_owned(), own.clone())]);
        let (zone_name, zone) = s.zone_of(req.user);
        let channels: Vec<(usize, &str)> = s
            .channels
            .iter()
            .enumerate()
            .filter(|(_, c)| c.serves(req.user))
            .map(|(i, c)| (i, c.name()))
            .collect();
        let names: Vec<&str> = channels.iter().map(|(_, n)| *n).collect();
        let quiet = s.quiet_hours_of(req.user);
        let server_quiet = config
            .quiet_hours_of(req.user)
            .map_or_else(|| "none".to_owned(), |q| q.describe());
        let own_quiet = match own.quiet_hours.as_deref() {
            None => String::new(),
            Some("") => "none".to_owned(),
            Some(q) => q.to_owned(),
        };
        let body = html! {
            p { "Check-ins your assistant scheduled with you. Cancel one, or move it to another time." }
            section aria-labelledby="how" {
                h2 #how { "How they reach you" }
                dl {
                    dt { "Delivered" }
                    dd { @if s.proactive_for(req.user) { "Yes" } @else { "No: proactive messages are off for you. Turn them on below." } }
                    dt { "Through" }
                    dd { @if names.is_empty() { "no channel" } @else { (names.join(", ")) } }
                    dt { "Time zone" }
                    dd { (zone_name) }
                    dt { "Quiet hours" }
                    dd { @match quiet { Some(q) => { (q.describe()) " (nothing is delivered then; it waits until they end)" }, None => "none" } }
                }
                @if !config.user_choices {
                    p.hint { "The server's operator sets these for everyone here." }
                } @else {
                form.choices method="post" action=(format!("{}/delivery", req.base)) {
                    (req.csrf())
                    label for="proactive" { "Proactive messages" }
                    select #proactive name="proactive" {
                        option value="" selected[own.proactive.is_none()] {
                            "As the server sets it (" @if config.proactive_for(req.user) { "on" } @else { "off" } ")"
                        }
                        option value="on" selected[own.proactive == Some(true)] { "On" }
                        option value="off" selected[own.proactive == Some(false)] { "Off" }
                    }
                    label for="timezone" { "Time zone" }
                    input #timezone name="timezone" value=(own.timezone.as_deref().unwrap_or("")) placeholder=(config.zone_of(req.user).0) aria-describedby="timezone-help";
                    small #timezone-help { "An IANA name such as Europe/Berlin; empty: the server's (" (config.zone_of(req.user).0) ")." }
                    label for="quiet_hours" { "Quiet hours" }
                    input #quiet_hours name="quiet_hours" value=(own_quiet) placeholder="22:00-07:00" aria-describedby="quiet-help";
                    small #quiet-help { "HH:MM-HH:MM in your time zone, or none; empty: the server's (" (server_quiet) ")." }
                    button type="submit" { "Save delivery settings" }
                }
                }
                @if !channels.is_empty() {
                    div.actions {
                        @for (i, name) in &channels {
                            form method="post" action=(format!("{}/test/{i}", req.base)) {
                                (req.csrf())
                                button type="submit" { "Send a test through " (name) }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="pending" {
                h2 #pending { "Pending (" (pending_total) ")" }
                @if pending.is_empty() {
                    p.empty { "Nothing is scheduled." }
                } @else {
                    ul.items { @for f in pending { (row(req, f, &zone)) } }
                    (pager_of(req.base, &[("page", &page.to_string())], "pending", "Pending pages", pending_page, pending_total))
                }
            }
            section aria-labelledby="past" {
                h2 #past { "Past (" (past_total) ")" }
                @if past.is_empty() {
                    p.empty { "None yet." }
                } @else {
                    ul.items { @for f in past { (row(req, f, &zone)) } }
                    (pager_of(req.base, &[("pending", &pending_page.to_string())], "page", "Past pages", page, past_total))
                }
            }
        };
        Reply::page("Follow-ups", body)
    }

    /// Sends a test check-in through one channel, now (nothing is stored).
    fn send_test(&self, req: &PageRequest<'_>, index: &str) -> Reply {
        let Ok(index) = index.parse::<usize>() else {
            return Reply::NotFound;
        };
        if self
            .settings
            .channels
            .get(index)
            .is_none_or(|c| !c.serves(req.user))
        {
            return Reply::NotFound;
        }
        {
            let now = now_ms();
            let mut tested = self.tested.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(last) = tested.get(req.user)
                && now - last < TEST_EVERY_MS
            {
                return Reply::Invalid(format!(
                    "A test was sent {} seconds ago; wait a minute between tests.",
                    (now - last) / 1000
                ));
            }
            tested.retain(|_, at| now - *at < TEST_EVERY_MS);
            tested.insert(req.user.to_owned(), now);
        }
        let sent = tokio::runtime::Handle::current().block_on(crate::scheduler::send_test(
            &self.effective(req.user),
            req.user,
            index,
            self.live.clone(),
        ));
        match sent {
            Ok(name) => Reply::redirect(req.base, format!("A test was sent through {name}.")),
            Err(e) => Reply::Invalid(format!("The test could not be sent: {e}")),
        }
    }

    fn cancel(&self, req: &PageRequest<'_>, f: &Followup) -> Reply {
        let reason = req.field("reason").trim();
        let reason = (!reason.is_empty()).then_some(reason);
        match self.backend.cancel(
            req.user,
            f.id,
            reason.or(Some("cancelled on the settings page")),
            now_ms(),
        ) {
            Ok(ChangeOutcome::Changed(_)) => {
                Reply::redirect(req.base, format!("Follow-up #{} cancelled.", f.id))
            }
            Ok(ChangeOutcome::NotPending(now)) => Reply::Invalid(format!(
                "Follow-up #{} is {} now and can no longer be cancelled.",
                f.id,
                status_words(now.status)
            )),
            Ok(ChangeOutcome::NotFound) => Reply::NotFound,
            Err(e) => failed(e),
        }
    }

    fn reschedule_form(&self, req: &PageRequest<'_>, f: &Followup, problem: Option<&str>) -> Reply {
        let (zone_name, zone) = self.zone(req.user);
        let current = jiff::Timestamp::from_millisecond(f.due_ms)
            .map(|t| {
                t.to_zoned_datetime(zone)
                    .strftime("%Y-%m-%dT%H:%M")
                    .to_string()
            })
            .unwrap_or_default();
        let value = if req.form.contains_key("due") {
            req.field("due").to_owned()
        } else {
            current
        };
        let body = html! {
            @if let Some(p) = problem { p.problem role="alert" { (p) } }
            blockquote { (f.context) }
            form method="post" action=(format!("{}/{}/reschedule", req.base, f.id)) {
                (req.csrf())
                label for="due" { "New time (" (zone_name) ")" }
                input #due type="datetime-local" name="due" value=(value) required;
                button type="submit" { "Reschedule" }
                " "
                a href=(req.base) { "Back" }
            }
        };
        Reply::page(format!("Reschedule follow-up #{}", f.id), body)
    }

    fn reschedule(&self, req: &PageRequest<'_>, f: &Followup) -> Reply {
        let (_, zone) = self.zone(req.user);
        let text = req.field("due").trim();
        let due = text
            .parse::<jiff::civil::DateTime>()
            .ok()
            .and_then(|dt| dt.to_zoned_datetime(zone.clone()).ok())
            .map(|z| z.timestamp().as_millisecond());
        let Some(due) = due else {
            return self.reschedule_form(
                req,
                f,
                Some("That is not a date and time: pick one, as 2026-12-24T09:30."),
            );
        };
        let now = now_ms();
        if due <= now {
            return self.reschedule_form(req, f, Some("That time has passed: pick a later one."));
        }
        match self.backend.update(req.user, f.id, None, Some(due), now) {
            Ok(ChangeOutcome::Changed(_)) => Reply::redirect(
                req.base,
                format!("Follow-up #{} moved to {}.", f.id, local_time(due, &zone)),
            ),
            Ok(ChangeOutcome::NotPending(now)) => Reply::Invalid(format!(
                "Follow-up #{} is {} now and can no longer be moved.",
                f.id,
                status_words(now.status)
            )),
            Ok(ChangeOutcome::NotFound) => Reply::NotFound,
            Err(e) => failed(e),
        }
    }
}

fn row(req: &PageRequest<'_>, f: &Followup, zone: &TimeZone) -> Markup {
    let pending = f.status == Status::Pending;
    html! {
        li.item id=(format!("followup-{}", f.id)) {
            p.content { (f.context) }
            p.meta {
                span.kind { "Follow-up #" (f.id) }
                " · " span.status { (status_words(f.status)) }
                " · due " span.when { (local_time(f.due_ms, zone)) }
                @if f.attempts > 0 { " · " (f.attempts) " delivery attempt" @if f.attempts != 1 { "s" } }
                @if let Some(at) = f.delivered_ms { " · delivered " (when(at)) }
                @if let Some(via) = &f.delivered_via { " through " (via) }
                @if let Some(e) = &f.last_error { " · last error: " (e) }
                @if let Some(r) = &f.cancel_reason { " · " (r) }
            }
            @if pending {
                div.actions {
                    a href=(format!("{}/{}/reschedule", req.base, f.id)) aria-label=(format!("Reschedule follow-up #{}", f.id)) { "Reschedule" }
                    form method="post" action=(format!("{}/{}/cancel", req.base, f.id)) {
                        (req.csrf())
                        button type="submit" aria-label=(format!("Cancel follow-up #{}", f.id)) { "Cancel follow-up" }
                    }
                }
            }
        }
    }
}

fn cancel_form(req: &PageRequest<'_>, f: &Followup) -> Reply {
    let body = html! {
        blockquote { (f.context) }
        form method="post" action=(format!("{}/{}/cancel", req.base, f.id)) {
            (req.csrf())
            label for="reason" { "Reason (optional)" }
            input #reason name="reason";
            button type="submit" { "Cancel follow-up" }
            " "
            a href=(req.base) { "Back" }
        }
    };
    Reply::page(format!("Cancel follow-up #{}?", f.id), body)
}

/// A time as a person reads it in their zone: `2026-12-24 09:30 CET`.
fn local_time(ms: i64, zone: &TimeZone) -> String {
    ringfence_core::time::local_text(ms, zone, "%Y-%m-%d %H:%M %Z")
}
