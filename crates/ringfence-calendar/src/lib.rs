//! The calendar family of ringfence (seed 003): its four tools and the calendars behind
//! them.
//!
//! - [`tools`]: the tools, over the `CalendarBackend` trait; [`CalendarPlug`] builds them from
//!   the `[calendar]` settings ([`settings`]), sending each call to the caller's provider.
//! - [`store`]: the local calendars' rows, in `calendar.db` or PostgreSQL.
//! - [`ical`]: iCalendar text as a tree, read and written without loss.
//! - [`event`]: times in their zones, recurrence expanded in a window (the `rrule` crate in
//!   the event's zone, so wall-clock times hold across daylight-saving changes), overrides
//!   and exceptions.
//! - [`object`]: the edits: a new event, a change to a whole series or one occurrence, an
//!   occurrence removed.
//! - [`backend`]: [`ObjectCalendar`], the tools' `CalendarBackend` over any store of objects,
//!   with conflict detection (ETags, and what the user last saw).
//! - [`local`]: the local calendar in `calendar.db`.
//! - [`caldav`]: RFC 4791 CalDAV servers.
//! - [`google`]: Google Calendar (API v3), connected by OAuth for installed apps with PKCE.
//! - [`login`]: a person's own CalDAV login, entered on the settings page, and the SSRF
//!   guard its URL is held to.

pub mod backend;
pub mod caldav;
pub mod event;
pub mod google;
pub mod ical;
pub mod local;
pub mod login;
pub mod object;
mod page;
mod plug;
pub mod settings;
pub mod store;
pub mod tools;
pub mod transfer;

pub use backend::{CalendarInfo, ObjectCalendar, ObjectStore, Stored, UserStores};
pub use plug::{Accounts, CalendarPlug, open};

/// The HTTP client of the calendar servers: ringfence's outbound client (proxy variables,
/// rustls), 10 s to connect, `timeout` for a whole request.
pub(crate) fn http_client(
    timeout: std::time::Duration,
) -> Result<reqwest::Client, ringfence_net::ClientError> {
    ringfence_net::client(&ringfence_net::Outbound {
        connect_timeout: std::time::Duration::from_secs(10),
        timeout,
    })
}
