//! Follow-ups in `followups.db`: the rows the four tools keep per user, and the claims a
//! scheduler takes on the ones that fall due.
//!
//! Any number of processes (`ringfence serve`, `ringfence scheduler`) may share one file.
//! A due follow-up is *claimed* in one transaction: its status becomes `delivering`, with
//! the claiming process's name and a lease. Only the holder of an unexpired lease may
//! complete it, so it is delivered once; a process that dies between claim and delivery
//! leaves a lease that expires, and the next claim takes the row again (the delivery then
//! carries the same idempotency key, so a receiver can drop the rare duplicate of a
//! delivery that did go out before the process died).

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::{ChangeOutcome, Followup, FollowupBackend, ListFilter, Listed, Status};
use ringfence_core::error::BackendError;

use ringfence_store::pg::copy::{self, Table};
use ringfence_store::{Durability, Schema, Store, StoreError};

pub mod pg;

/// The follow-ups' state, for `ringfence store migrate`: both schemas, the tables, and the
/// SQLite file at `file`.
pub fn state(file: PathBuf) -> copy::Family {
    copy::Family {
        sqlite: &FOLLOWUP_SCHEMA,
        postgres: &pg::FOLLOWUP_PG_SCHEMA,
        tables: &[
            Table {
                name: "followups",
                renamed: None,
                key: &["id"],
                identity: Some("id"),
            },
            Table {
                name: "followup_counters",
                renamed: None,
                key: &["user"],
                identity: None,
            },
            Table {
                name: "followup_choices",
                renamed: None,
                key: &["user"],
                identity: None,
            },
        ],
        file,
        durability: Durability::Full,
    }
}

/// The follow-up database (`followups.db`).
pub const FOLLOWUP_SCHEMA: Schema = Schema {
    name: "followups",
    migrations: &[
        // 1: follow-ups, their numbering per user, and the scheduler's claims.
        "CREATE TABLE followups (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user TEXT NOT NULL,
            number INTEGER NOT NULL,
            context TEXT NOT NULL,
            due_ms INTEGER NOT NULL,
            status TEXT NOT NULL CHECK (status IN
                ('pending', 'delivering', 'completed', 'cancelled', 'failed')),
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            -- Not delivered before this (quiet hours, a retry's back-off); NULL: due_ms.
            hold_ms INTEGER,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            lease_owner TEXT,
            lease_until_ms INTEGER,
            delivered_ms INTEGER,
            delivered_via TEXT,
            cancel_reason TEXT,
            -- The same for every attempt of one follow-up: receivers drop duplicates by it.
            idempotency_key TEXT NOT NULL
        );
        CREATE UNIQUE INDEX followups_number ON followups (user, number);
        CREATE INDEX followups_ready ON followups (status, due_ms);
        CREATE TABLE followup_counters (
            user TEXT PRIMARY KEY,
            last INTEGER NOT NULL
        ) WITHOUT ROWID;",
        // 2: an idempotency key names one follow-up (imports look rows up by it).
        "CREATE UNIQUE INDEX followups_key ON followups (idempotency_key);",
        // 3: held follow-ups and running claims in time order, so the scheduler's looks at
        // the database read what is ready, not every pending row.
        "CREATE INDEX followups_held ON followups (hold_ms)
             WHERE status = 'pending' AND hold_ms IS NOT NULL;
         CREATE INDEX followups_leases ON followups (lease_until_ms)
             WHERE status = 'delivering';",
        // 4: each person's own delivery choices (the settings page); NULL: the
        // configuration's. quiet_hours '' is "none".
        "CREATE TABLE followup_choices (
            user TEXT PRIMARY KEY,
            proactive INTEGER CHECK (proactive IN (0, 1)),
            timezone TEXT,
            quiet_hours TEXT,
            updated_ms INTEGER NOT NULL
        ) WITHOUT ROWID;",
    ],
};

/// A person's own delivery choices, made on the settings page. Each `None` follows the
/// configuration (`[followups.users.NAME]`, else `[followups]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choices {
    /// Proactive messages on or off.
    pub proactive: Option<bool>,
    /// An IANA time zone name.
    pub timezone: Option<String>,
    /// `HH:MM-HH:MM`, or `""` for no quiet hours.
    pub quiet_hours: Option<String>,
}

impl Choices {
    /// Whether every choice follows the configuration (nothing worth a row).
    pub fn is_empty(&self) -> bool {
        self == &Choices::default()
    }
}

/// The columns [`from_row`] reads, in its order.
pub(crate) const COLUMNS: &str = "number, context, due_ms, status, created_ms, updated_ms, attempts, \
    last_error, delivered_ms, delivered_via, cancel_reason";

fn from_row(r: &rusqlite::Row) -> rusqlite::Result<Followup> {
    let status: String = r.get(3)?;
    Ok(Followup {
        id: r.get(0)?,
        context: r.get(1)?,
        due_ms: r.get(2)?,
        status: Status::parse(&status).unwrap_or(Status::Failed),
        created_ms: r.get(4)?,
        updated_ms: r.get(5)?,
        attempts: r.get(6)?,
        last_error: r.get(7)?,
        delivered_ms: r.get(8)?,
        delivered_via: r.get(9)?,
        cancel_reason: r.get(10)?,
    })
}

/// A follow-up a scheduler claimed: deliver it, then [`FollowupDb::complete`] or
/// [`FollowupDb::retry_or_fail`] it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The row (not the user's number).
    pub row: i64,
    pub user: String,
    /// The user's number for it (`followup_id`).
    pub number: i64,
    pub context: String,
    pub due_ms: i64,
    /// This attempt's number, from 1.
    pub attempt: i64,
    pub idempotency_key: String,
}

/// Whose follow-ups a scheduler may deliver now (proactive messages on).
#[derive(Debug, Clone, PartialEq)]
pub enum Deliverable {
    /// Every user's but these.
    AllBut(Vec<String>),
    /// Only these users'.
    Only(Vec<String>),
}

/// The SQL condition selecting the users `deliverable` allows (the list bound as JSON to
/// the parameter `param`), or `None` when it allows nobody.
fn user_filter(deliverable: &Deliverable, param: &str) -> Option<(String, String)> {
    let (users, negate) = match deliverable {
        Deliverable::AllBut(u) => (u, true),
        Deliverable::Only(u) => (u, false),
    };
    if !negate && users.is_empty() {
        return None;
    }
    let json = serde_json::to_string(users).unwrap_or_else(|_| "[]".into());
    let not = if negate { "NOT " } else { "" };
    Some((
        format!("user {not}IN (SELECT value FROM json_each({param}))"),
        json,
    ))
}

/// What a scheduler and the `followups` commands need of the follow-up store besides what
/// the tools do: claims, their outcomes, and export/import. One implementation per backend
/// (SQLite's [`FollowupDb`], and PostgreSQL's with the feature `postgres`).
pub trait FollowupStore: FollowupBackend {
    /// Claims up to `limit` follow-ups that are due at `now_ms` (their hold passed) for the
    /// users `deliverable` allows, and those whose earlier claim's lease expired, for
    /// `lease_ms`; oldest due first. A follow-up whose claims expired `max_attempts` times
    /// (its process died each time) is marked failed instead of claimed again.
    fn claim_due(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
        deliverable: &Deliverable,
        max_attempts: i64,
    ) -> Result<Vec<Claim>, StoreError>;

    /// Marks a claimed follow-up delivered, if `owner` still holds its claim (a lease that
    /// expired may have been taken by another process: then `false`, nothing changes).
    fn complete(&self, row: i64, owner: &str, via: &str, at_ms: i64) -> Result<bool, StoreError>;

    /// A claimed follow-up whose delivery failed: back to pending until `retry_at_ms`, or
    /// `failed` once `max_attempts` attempts were made; the error is kept either way.
    /// `false` if `owner` no longer holds the claim.
    fn retry_or_fail(
        &self,
        row: i64,
        owner: &str,
        error: &str,
        retry_at_ms: i64,
        max_attempts: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Gives a claim back without counting it as an attempt, held until `until_ms` (a
    /// follow-up that fell in its user's quiet hours). `false` if the claim is not `owner`'s.
    fn hold(&self, row: i64, owner: &str, until_ms: i64, now_ms: i64) -> Result<bool, StoreError>;

    /// When the next follow-up becomes claimable (a due or held time, or a lease's end),
    /// whoever's it is; `None` when nothing waits.
    fn next_ready_ms(&self, deliverable: &Deliverable) -> Result<Option<i64>, StoreError>;

    /// How many follow-ups are in each status (for metrics and the CLI), by status.
    fn counts(&self) -> Result<Vec<(String, i64)>, StoreError>;

    /// Every person's own delivery choices, by user.
    fn choices(&self) -> Result<Vec<(String, Choices)>, StoreError>;

    /// `user`'s own delivery choices, if they made any.
    fn choices_of(&self, user: &str) -> Result<Option<Choices>, StoreError>;

    /// Keeps `user`'s choices (all of them at once; all `None` removes the row).
    fn set_choices(&self, user: &str, choices: &Choices, now_ms: i64) -> Result<(), StoreError>;

    /// Every follow-up (of `user`, when given), by user and number.
    fn export(&self, user: Option<&str>) -> Result<Vec<ExportRecord>, StoreError>;

    /// Stores exported follow-ups (for `user`, when given, else each line's), numbered anew
    /// per user, in one transaction. One whose idempotency key is already here is skipped,
    /// so an import can be repeated; one that was being delivered becomes pending again.
    fn import(
        &self,
        records: &[ExportRecord],
        user: Option<&str>,
    ) -> Result<ImportReport, StoreError>;
}

/// Checks an exported record before it is stored (`i` its index); returns its owner and
/// the status it is stored with (one being delivered becomes pending again).
pub(crate) fn check_record<'a>(
    i: usize,
    r: &'a ExportRecord,
    user: Option<&'a str>,
) -> Result<(&'a str, Status), StoreError> {
    let owner = user.unwrap_or(&r.user);
    let bad = |why: &str| StoreError::InvalidRecord(format!("record {}: {why}", i + 1));
    if owner.trim().is_empty() {
        return Err(bad("no user"));
    }
    let n = r.context.trim().chars().count();
    if n == 0 || n > crate::MAX_CONTEXT_CHARS {
        return Err(bad(&format!(
            "the context must have 1 to {} characters",
            crate::MAX_CONTEXT_CHARS
        )));
    }
    if r.idempotency_key.trim().is_empty() {
        return Err(bad("no idempotency_key"));
    }
    let status = match Status::parse(&r.status) {
        Some(Status::Delivering) | None => Status::Pending,
        Some(s) => s,
    };
    Ok((owner, status))
}

/// The follow-up database.
#[derive(Debug)]
pub struct FollowupDb {
    store: Store,
}

fn backend(e: impl Into<StoreError>) -> BackendError {
    BackendError::new(e.into())
}

impl FollowupDb {
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> Result<FollowupDb, StoreError> {
        Ok(FollowupDb {
            store: ringfence_store::open_file(path, Durability::Full, &FOLLOWUP_SCHEMA)?,
        })
    }

    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// One user's follow-up by its number.
    fn find(
        tx: &rusqlite::Transaction,
        user: &str,
        number: i64,
    ) -> rusqlite::Result<Option<Followup>> {
        tx.query_row(
            &format!("SELECT {COLUMNS} FROM followups WHERE user = ?1 AND number = ?2"),
            params![user, number],
            from_row,
        )
        .optional()
    }
}

impl FollowupStore for FollowupDb {
    fn claim_due(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
        deliverable: &Deliverable,
        max_attempts: i64,
    ) -> Result<Vec<Claim>, StoreError> {
        let Some((user_filter, users_json)) = user_filter(deliverable, "?3") else {
            return Ok(Vec::new());
        };
        let mut conn = self.store.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            &format!(
                "UPDATE followups SET status = 'failed', lease_owner = NULL,
                     lease_until_ms = NULL, updated_ms = ?1,
                     last_error = 'the process delivering it stopped before it finished, ' || attempts || ' times'
                 WHERE status = 'delivering' AND lease_until_ms <= ?1 AND attempts >= ?2
                   AND {user_filter}"
            ),
            params![now_ms, max_attempts, users_json],
        )?;
        let claims = {
            let mut select = tx.prepare_cached(&format!(
                // Three index-ordered parts (due and not held; held until now; claims whose
                // lease ended) instead of one OR, which would read every pending row.
                "SELECT id, user, number, context, due_ms, attempts, idempotency_key FROM (
                     SELECT * FROM followups INDEXED BY followups_ready
                         WHERE status = 'pending' AND due_ms <= ?1 AND hold_ms IS NULL
                           AND {user_filter}
                     UNION ALL
                     SELECT * FROM followups INDEXED BY followups_held
                         WHERE status = 'pending' AND hold_ms IS NOT NULL AND hold_ms <= ?1
                           AND due_ms <= ?1 AND {user_filter}
                     UNION ALL
                     SELECT * FROM followups INDEXED BY followups_leases
                         WHERE status = 'delivering' AND lease_until_ms <= ?1 AND {user_filter})
                 ORDER BY due_ms, id
                 LIMIT ?2"
            ))?;
            let rows = select.query_map(params![now_ms, limit as i64, users_json], |r| {
                Ok(Claim {
                    row: r.get(0)?,
                    user: r.get(1)?,
                    number: r.get(2)?,
                    context: r.get(3)?,
                    due_ms: r.get(4)?,
                    attempt: r.get::<_, i64>(5)? + 1,
                    idempotency_key: r.get(6)?,
                })
            })?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        {
            let mut claim = tx.prepare_cached(
                "UPDATE followups SET status = 'delivering', lease_owner = ?2,
                     lease_until_ms = ?3, attempts = attempts + 1, updated_ms = ?4
                 WHERE id = ?1",
            )?;
            for c in &claims {
                claim.execute(params![c.row, owner, now_ms + lease_ms, now_ms])?;
            }
        }
        tx.commit()?;
        Ok(claims)
    }

    fn complete(&self, row: i64, owner: &str, via: &str, at_ms: i64) -> Result<bool, StoreError> {
        let n = self.store.conn().execute(
            "UPDATE followups SET status = 'completed', delivered_ms = ?3, delivered_via = ?4,
                 lease_owner = NULL, lease_until_ms = NULL, last_error = NULL, updated_ms = ?3
             WHERE id = ?1 AND status = 'delivering' AND lease_owner = ?2",
            params![row, owner, at_ms, via],
        )?;
        Ok(n == 1)
    }

    fn retry_or_fail(
        &self,
        row: i64,
        owner: &str,
        error: &str,
        retry_at_ms: i64,
        max_attempts: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let n = self.store.conn().execute(
            "UPDATE followups SET
                 status = iif(attempts >= ?5, 'failed', 'pending'),
                 hold_ms = iif(attempts >= ?5, hold_ms, ?4),
                 last_error = ?3, lease_owner = NULL, lease_until_ms = NULL, updated_ms = ?6
             WHERE id = ?1 AND status = 'delivering' AND lease_owner = ?2",
            params![row, owner, error, retry_at_ms, max_attempts, now_ms],
        )?;
        Ok(n == 1)
    }

    fn hold(&self, row: i64, owner: &str, until_ms: i64, now_ms: i64) -> Result<bool, StoreError> {
        let n = self.store.conn().execute(
            "UPDATE followups SET status = 'pending', hold_ms = ?3, attempts = attempts - 1,
                 lease_owner = NULL, lease_until_ms = NULL, updated_ms = ?4
             WHERE id = ?1 AND status = 'delivering' AND lease_owner = ?2",
            params![row, owner, until_ms, now_ms],
        )?;
        Ok(n == 1)
    }

    fn next_ready_ms(&self, deliverable: &Deliverable) -> Result<Option<i64>, StoreError> {
        let Some((user_filter, users_json)) = user_filter(deliverable, "?1") else {
            return Ok(None);
        };
        let v: Option<i64> = self.store.conn().query_row(
            &format!(
                // The first of each part in index order (a held row's time is its hold,
                // which a new due time clears).
                "SELECT min(t) FROM (
                     SELECT (SELECT due_ms FROM followups INDEXED BY followups_ready
                             WHERE status = 'pending' AND hold_ms IS NULL AND {user_filter}
                             ORDER BY due_ms LIMIT 1) AS t
                     UNION ALL
                     SELECT (SELECT max(due_ms, hold_ms) FROM followups INDEXED BY followups_held
                             WHERE status = 'pending' AND hold_ms IS NOT NULL AND {user_filter}
                             ORDER BY hold_ms LIMIT 1)
                     UNION ALL
                     SELECT (SELECT lease_until_ms FROM followups INDEXED BY followups_leases
                             WHERE status = 'delivering' AND {user_filter}
                             ORDER BY lease_until_ms LIMIT 1))"
            ),
            params![users_json],
            |r| r.get(0),
        )?;
        Ok(v)
    }

    fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let conn = self.store.conn();
        let mut q =
            conn.prepare("SELECT status, count(*) FROM followups GROUP BY status ORDER BY status")?;
        let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn choices(&self) -> Result<Vec<(String, Choices)>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare_cached(
            "SELECT user, proactive, timezone, quiet_hours FROM followup_choices ORDER BY user",
        )?;
        let rows = q.query_map([], |r| {
            Ok((
                r.get(0)?,
                Choices {
                    proactive: r.get(1)?,
                    timezone: r.get(2)?,
                    quiet_hours: r.get(3)?,
                },
            ))
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn choices_of(&self, user: &str) -> Result<Option<Choices>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare_cached(
            "SELECT proactive, timezone, quiet_hours FROM followup_choices WHERE user = ?1",
        )?;
        Ok(q.query_row([user], |r| {
            Ok(Choices {
                proactive: r.get(0)?,
                timezone: r.get(1)?,
                quiet_hours: r.get(2)?,
            })
        })
        .optional()?)
    }

    fn set_choices(&self, user: &str, choices: &Choices, now_ms: i64) -> Result<(), StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // What waited for the old quiet hours is looked at again (the scheduler holds it anew
        // if the new ones cover it); a retry's back-off (after an attempt) keeps its wait.
        tx.execute(
            "UPDATE followups SET hold_ms = NULL, updated_ms = ?2
             WHERE user = ?1 AND status = 'pending' AND attempts = 0 AND hold_ms IS NOT NULL",
            params![user, now_ms],
        )?;
        let conn = &tx;
        if choices.is_empty() {
            conn.execute(
                "DELETE FROM followup_choices WHERE user = ?1",
                params![user],
            )?;
        } else {
            conn.execute(
                "INSERT INTO followup_choices (user, proactive, timezone, quiet_hours, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (user) DO UPDATE SET proactive = excluded.proactive,
                     timezone = excluded.timezone, quiet_hours = excluded.quiet_hours,
                     updated_ms = excluded.updated_ms",
                params![
                    user,
                    choices.proactive,
                    choices.timezone,
                    choices.quiet_hours,
                    now_ms
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn export(&self, user: Option<&str>) -> Result<Vec<ExportRecord>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare(
            "SELECT user, number, context, due_ms, status, created_ms, updated_ms, attempts,
                 last_error, delivered_ms, delivered_via, cancel_reason, idempotency_key
             FROM followups WHERE (?1 IS NULL OR user = ?1) ORDER BY user, number",
        )?;
        let rows = q.query_map(params![user], |r| {
            Ok(ExportRecord {
                user: r.get(0)?,
                id: r.get(1)?,
                context: r.get(2)?,
                due_ms: r.get(3)?,
                status: r.get(4)?,
                created_ms: r.get(5)?,
                updated_ms: r.get(6)?,
                attempts: r.get(7)?,
                last_error: r.get(8)?,
                delivered_ms: r.get(9)?,
                delivered_via: r.get(10)?,
                cancel_reason: r.get(11)?,
                idempotency_key: r.get(12)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn import(
        &self,
        records: &[ExportRecord],
        user: Option<&str>,
    ) -> Result<ImportReport, StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut report = ImportReport::default();
        for (i, r) in records.iter().enumerate() {
            let (owner, status) = check_record(i, r, user)?;
            let exists: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM followups WHERE idempotency_key = ?1)",
                params![r.idempotency_key],
                |row| row.get(0),
            )?;
            if exists {
                report.skipped += 1;
                continue;
            }
            let number: i64 = tx.query_row(
                "INSERT INTO followup_counters (user, last) VALUES (?1, 1)
                 ON CONFLICT (user) DO UPDATE SET last = last + 1 RETURNING last",
                params![owner],
                |row| row.get(0),
            )?;
            tx.execute(
                "INSERT INTO followups (user, number, context, due_ms, status, created_ms,
                     updated_ms, attempts, last_error, delivered_ms, delivered_via,
                     cancel_reason, idempotency_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    owner,
                    number,
                    r.context,
                    r.due_ms,
                    status.as_str(),
                    r.created_ms,
                    r.updated_ms,
                    r.attempts,
                    r.last_error,
                    r.delivered_ms,
                    r.delivered_via,
                    r.cancel_reason,
                    r.idempotency_key
                ],
            )?;
            report.imported += 1;
        }
        tx.commit()?;
        Ok(report)
    }
}

/// One follow-up as `ringfence followups export` writes it (JSON lines) and `import` reads
/// it back. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExportRecord {
    pub user: String,
    pub id: i64,
    pub context: String,
    pub due_ms: i64,
    pub status: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    #[serde(default)]
    pub attempts: i64,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub delivered_ms: Option<i64>,
    #[serde(default)]
    pub delivered_via: Option<String>,
    #[serde(default)]
    pub cancel_reason: Option<String>,
    pub idempotency_key: String,
}

/// What an import did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub imported: usize,
    pub skipped: usize,
}

impl FollowupBackend for FollowupDb {
    fn schedule(
        &self,
        user: &str,
        context: &str,
        due_ms: i64,
        now_ms: i64,
    ) -> Result<Followup, BackendError> {
        let mut conn = self.store.conn();
        let mut run = || -> Result<Followup, StoreError> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let number: i64 = tx.query_row(
                "INSERT INTO followup_counters (user, last) VALUES (?1, 1)
                 ON CONFLICT (user) DO UPDATE SET last = last + 1 RETURNING last",
                params![user],
                |r| r.get(0),
            )?;
            let key = idempotency_key(user, number, now_ms);
            tx.execute(
                "INSERT INTO followups (user, number, context, due_ms, status, created_ms,
                     updated_ms, idempotency_key)
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?6)",
                params![user, number, context, due_ms, now_ms, key],
            )?;
            let f = Self::find(&tx, user, number)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
            tx.commit()?;
            Ok(f)
        };
        run().map_err(backend)
    }

    fn list(&self, user: &str, filter: ListFilter, limit: usize) -> Result<Listed, BackendError> {
        let conn = self.store.conn();
        let (cond, order) = match filter {
            ListFilter::Pending => ("status IN ('pending', 'delivering')", "due_ms, number"),
            ListFilter::Completed => ("status = 'completed'", "delivered_ms DESC, number DESC"),
            ListFilter::All => ("1", "number DESC"),
        };
        let run = || -> Result<Listed, StoreError> {
            let total: i64 = conn.query_row(
                &format!("SELECT count(*) FROM followups WHERE user = ?1 AND {cond}"),
                params![user],
                |r| r.get(0),
            )?;
            let mut q = conn.prepare(&format!(
                "SELECT {COLUMNS} FROM followups WHERE user = ?1 AND {cond} ORDER BY {order} LIMIT ?2"
            ))?;
            let rows = q.query_map(params![user, limit as i64], from_row)?;
            Ok(Listed {
                followups: rows.collect::<Result<Vec<_>, _>>()?,
                total: total as usize,
            })
        };
        run().map_err(backend)
    }

    fn due(
        &self,
        user: &str,
        since_ms: i64,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<Followup>, BackendError> {
        let conn = self.store.conn();
        let run = || -> Result<Vec<Followup>, StoreError> {
            let mut q = conn.prepare(&format!(
                "SELECT {COLUMNS} FROM followups
                 WHERE user = ?1
                   AND ((status = 'completed' AND delivered_ms >= ?2)
                     OR (status IN ('pending', 'delivering') AND due_ms <= ?3))
                 ORDER BY coalesce(delivered_ms, due_ms) DESC, number DESC LIMIT ?4"
            ))?;
            let rows = q.query_map(params![user, since_ms, now_ms, limit as i64], from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        };
        run().map_err(backend)
    }

    fn update(
        &self,
        user: &str,
        id: i64,
        context: Option<&str>,
        due_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        // Only a pending follow-up; a new time starts afresh: no hold from quiet hours or an
        // earlier retry, no attempts counted.
        self.change(user, id, now_ms, false, |tx| {
            tx.execute(
                "UPDATE followups SET context = coalesce(?3, context),
                     due_ms = coalesce(?4, due_ms),
                     hold_ms = iif(?4 IS NULL, hold_ms, NULL),
                     attempts = iif(?4 IS NULL, attempts, 0),
                     last_error = iif(?4 IS NULL, last_error, NULL),
                     updated_ms = ?5
                 WHERE user = ?1 AND number = ?2",
                params![user, id, context, due_ms, now_ms],
            )
        })
    }

    fn cancel(
        &self,
        user: &str,
        id: i64,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        // A pending one, or one claimed by a process that died (its lease ended).
        self.change(user, id, now_ms, true, |tx| {
            tx.execute(
                "UPDATE followups SET status = 'cancelled', cancel_reason = ?3, updated_ms = ?4,
                     lease_owner = NULL, lease_until_ms = NULL
                 WHERE user = ?1 AND number = ?2",
                params![user, id, reason, now_ms],
            )
        })
    }
}

impl FollowupDb {
    /// Changes one of `user`'s follow-ups with `apply`, in one transaction, if it is pending
    /// (or, with `abandoned_too`, being delivered by a claim whose lease ended); returns it
    /// as it is afterwards.
    fn change(
        &self,
        user: &str,
        id: i64,
        now_ms: i64,
        abandoned_too: bool,
        apply: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<usize>,
    ) -> Result<ChangeOutcome, BackendError> {
        let mut conn = self.store.conn();
        let run = || -> Result<ChangeOutcome, StoreError> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(f) = Self::find(&tx, user, id)? else {
                return Ok(ChangeOutcome::NotFound);
            };
            let abandoned = abandoned_too
                && tx.query_row(
                    "SELECT status = 'delivering' AND lease_until_ms <= ?3 FROM followups
                     WHERE user = ?1 AND number = ?2",
                    params![user, id, now_ms],
                    |r| r.get::<_, bool>(0),
                )?;
            if f.status != Status::Pending && !abandoned {
                return Ok(ChangeOutcome::NotPending(f));
            }
            apply(&tx)?;
            let f = Self::find(&tx, user, id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
            tx.commit()?;
            Ok(ChangeOutcome::Changed(f))
        };
        run().map_err(backend)
    }
}

/// A key that names one follow-up for good (every attempt carries it, an export keeps it):
/// the user, the number and the time, made unique across databases and processes by the
/// clock's nanoseconds, the process and a counter.
pub(crate) fn idempotency_key(user: &str, number: i64, created_ms: i64) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut h = blake3::Hasher::new();
    h.update(user.as_bytes());
    h.update(&[0]);
    h.update(&number.to_le_bytes());
    h.update(&created_ms.to_le_bytes());
    h.update(&nanos.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(
        &COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    format!("rf-followup-{}", &h.finalize().to_hex()[..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    /// Where a test's follow-ups live: SQLite or PostgreSQL.
    trait Bed: Sync {
        /// A handle on the test's store (each call another, as another process would open).
        fn db(&self) -> Box<dyn FollowupStore>;
        /// Another, empty store (and what keeps it alive).
        fn another(&self) -> (Box<dyn std::any::Any>, Box<dyn FollowupStore>);
    }

    struct SqliteBed(tempfile::TempDir);

    impl Bed for SqliteBed {
        fn db(&self) -> Box<dyn FollowupStore> {
            Box::new(FollowupDb::open(&self.0.path().join("followups.db")).unwrap())
        }
        fn another(&self) -> (Box<dyn std::any::Any>, Box<dyn FollowupStore>) {
            let bed = SqliteBed(tempfile::tempdir().unwrap());
            let db = bed.db();
            (Box::new(bed), db)
        }
    }

    struct PgBed(ringfence_store::pg::scratch::ScratchDb);

    impl Bed for PgBed {
        fn db(&self) -> Box<dyn FollowupStore> {
            Box::new(pg::PgFollowups::open(self.0.connect()).unwrap())
        }
        fn another(&self) -> (Box<dyn std::any::Any>, Box<dyn FollowupStore>) {
            let bed =
                PgBed(ringfence_store::pg::scratch::ScratchDb::new().expect("a test cluster"));
            let db = bed.db();
            (Box::new(bed), db)
        }
    }

    ringfence_store::on_both_beds!(
        numbers_are_per_user_and_lists_are_ordered,
        due_lists_what_fell_due_in_the_window_delivered_or_not,
        another_users_number_is_not_found_and_only_pending_ones_change,
        a_due_follow_up_is_claimed_once_and_completed_by_its_claimant,
        an_expired_lease_is_taken_over_with_the_same_key,
        failed_deliveries_are_retried_then_given_up_and_holds_wait,
        only_users_with_proactive_messages_are_claimed,
        an_export_imports_into_another_database_once,
        undeliverable_users_neither_wake_the_scheduler_nor_get_claimed,
        a_claim_abandoned_too_often_fails_and_an_abandoned_one_can_be_cancelled,
        a_new_time_starts_the_attempts_afresh_and_bad_imports_store_nothing,
        processes_sharing_the_file_claim_each_follow_up_once,
        a_persons_choices_are_kept_replaced_and_removed,
    );

    fn everyone() -> Deliverable {
        Deliverable::AllBut(Vec::new())
    }

    fn numbers_are_per_user_and_lists_are_ordered(t: &dyn Bed) {
        let db = t.db();
        let a1 = db.schedule("alice", "interview", 90 * MIN, 0).unwrap();
        let a2 = db.schedule("alice", "dentist", 30 * MIN, 0).unwrap();
        let b1 = db.schedule("bob", "bob's", 10 * MIN, 0).unwrap();
        assert_eq!((a1.id, a2.id, b1.id), (1, 2, 1));
        assert_eq!(a1.status, Status::Pending);
        let pending = db.list("alice", ListFilter::Pending, 10).unwrap();
        assert_eq!(pending.total, 2);
        // Soonest first.
        assert_eq!(
            pending.followups.iter().map(|f| f.id).collect::<Vec<_>>(),
            vec![2, 1]
        );
        let limited = db.list("alice", ListFilter::Pending, 1).unwrap();
        assert_eq!((limited.followups.len(), limited.total), (1, 2));
        // "No limit" (usize::MAX) lists them all on both stores (PostgreSQL's LIMIT is
        // a signed 64-bit number).
        let all = db.list("alice", ListFilter::All, usize::MAX).unwrap();
        assert_eq!((all.followups.len(), all.total), (2, 2));
        assert!(
            db.list("alice", ListFilter::Completed, 10)
                .unwrap()
                .followups
                .is_empty()
        );
        // Bob sees only his.
        let bob = db.list("bob", ListFilter::All, 10).unwrap();
        assert_eq!(bob.followups.len(), 1);
        assert_eq!(bob.followups[0].context, "bob's");
    }

    fn due_lists_what_fell_due_in_the_window_delivered_or_not(t: &dyn Bed) {
        let db = t.db();
        let day = 24 * 60 * MIN;
        db.schedule("alice", "long ago", 10 * MIN, 0).unwrap(); // 1: delivered before the window
        db.schedule("alice", "delivered", day + 10 * MIN, 0)
            .unwrap(); // 2
        db.schedule("alice", "overdue", day + 20 * MIN, 0).unwrap(); // 3
        db.schedule("alice", "cancelled", day + 30 * MIN, 0)
            .unwrap(); // 4
        db.schedule("alice", "later", day + 90 * MIN, 0).unwrap(); // 5: not due yet
        db.schedule("bob", "bob's", day + 10 * MIN, 0).unwrap();
        db.cancel("alice", 4, None, 1).unwrap();
        let claims = db
            .claim_due("me", day + 11 * MIN, MIN, 10, &everyone(), 5)
            .unwrap();
        let row = |n: i64| {
            claims
                .iter()
                .find(|c| c.user == "alice" && c.number == n)
                .unwrap()
                .row
        };
        // #1 was delivered long before the window, #2 in it.
        assert!(db.complete(row(1), "me", "mcp", 20 * MIN).unwrap());
        assert!(db.complete(row(2), "me", "mcp", day + 11 * MIN).unwrap());
        let now = day + 60 * MIN;
        let due = db.due("alice", now - day, now, 50).unwrap();
        let got: Vec<(i64, Status)> = due.iter().map(|f| (f.id, f.status)).collect();
        assert_eq!(got, [(3, Status::Pending), (2, Status::Completed)]);
        assert_eq!(db.due("alice", now - day, now, 1).unwrap().len(), 1);
        assert!(db.due("carol", 0, now, 50).unwrap().is_empty());
    }

    fn another_users_number_is_not_found_and_only_pending_ones_change(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "a", 10 * MIN, 0).unwrap();
        assert_eq!(
            db.update("bob", 1, Some("x"), None, 1).unwrap(),
            ChangeOutcome::NotFound
        );
        assert_eq!(
            db.cancel("bob", 1, None, 1).unwrap(),
            ChangeOutcome::NotFound
        );
        let ChangeOutcome::Changed(f) =
            db.update("alice", 1, Some("b"), Some(20 * MIN), 5).unwrap()
        else {
            panic!("not changed")
        };
        assert_eq!(
            (f.context.as_str(), f.due_ms, f.updated_ms),
            ("b", 20 * MIN, 5)
        );
        let ChangeOutcome::Changed(f) = db.update("alice", 1, None, Some(30 * MIN), 6).unwrap()
        else {
            panic!("not changed")
        };
        assert_eq!((f.context.as_str(), f.due_ms), ("b", 30 * MIN));
        let ChangeOutcome::Changed(f) = db.cancel("alice", 1, Some("resolved"), 7).unwrap() else {
            panic!("not cancelled")
        };
        assert_eq!(f.status, Status::Cancelled);
        assert_eq!(f.cancel_reason.as_deref(), Some("resolved"));
        assert!(matches!(
            db.update("alice", 1, Some("c"), None, 8).unwrap(),
            ChangeOutcome::NotPending(f) if f.status == Status::Cancelled
        ));
        // Cancelled ones show under "all", not "pending".
        assert_eq!(db.list("alice", ListFilter::Pending, 10).unwrap().total, 0);
        assert_eq!(db.list("alice", ListFilter::All, 10).unwrap().total, 1);
    }

    fn a_due_follow_up_is_claimed_once_and_completed_by_its_claimant(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "soon", 10 * MIN, 0).unwrap();
        db.schedule("alice", "later", 60 * MIN, 0).unwrap();
        assert!(
            db.claim_due("p1", 5 * MIN, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        assert_eq!(db.next_ready_ms(&everyone()).unwrap(), Some(10 * MIN));
        let claims = db
            .claim_due("p1", 10 * MIN, MIN, 10, &everyone(), 9)
            .unwrap();
        assert_eq!(claims.len(), 1);
        let c = &claims[0];
        assert_eq!((c.number, c.attempt, c.context.as_str()), (1, 1, "soon"));
        assert!(c.idempotency_key.starts_with("rf-followup-"));
        // Claimed: nobody else gets it while the lease runs.
        assert!(
            db.claim_due("p2", 10 * MIN + 1, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        // Pending lists still show it, as being delivered; it cannot be changed now.
        let listed = db.list("alice", ListFilter::Pending, 10).unwrap();
        assert_eq!(listed.followups[0].status, Status::Delivering);
        assert!(matches!(
            db.cancel("alice", 1, None, 10 * MIN).unwrap(),
            ChangeOutcome::NotPending(_)
        ));
        assert!(!db.complete(c.row, "p2", "mcp", 10 * MIN + 2).unwrap());
        assert!(
            db.complete(c.row, "p1", "mcp,webhook", 10 * MIN + 2)
                .unwrap()
        );
        let done = db.list("alice", ListFilter::Completed, 10).unwrap();
        assert_eq!(
            done.followups[0].delivered_via.as_deref(),
            Some("mcp,webhook")
        );
        assert_eq!(done.followups[0].delivered_ms, Some(10 * MIN + 2));
        assert!(matches!(
            db.update("alice", 1, Some("x"), None, 11 * MIN).unwrap(),
            ChangeOutcome::NotPending(f) if f.status == Status::Completed
        ));
    }

    fn an_expired_lease_is_taken_over_with_the_same_key(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "x", MIN, 0).unwrap();
        let first = db.claim_due("dead", MIN, MIN, 10, &everyone(), 9).unwrap();
        // The claimant died: after the lease, another process claims it again.
        assert!(
            db.claim_due("p2", 2 * MIN - 1, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        let second = db
            .claim_due("p2", 2 * MIN, MIN, 10, &everyone(), 9)
            .unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].attempt, 2);
        assert_eq!(second[0].idempotency_key, first[0].idempotency_key);
        // The late first claimant cannot complete it any more.
        assert!(!db.complete(first[0].row, "dead", "mcp", 2 * MIN).unwrap());
        assert!(db.complete(second[0].row, "p2", "mcp", 2 * MIN).unwrap());
    }

    fn failed_deliveries_are_retried_then_given_up_and_holds_wait(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "x", MIN, 0).unwrap();
        let c = db
            .claim_due("p", MIN, MIN, 10, &everyone(), 9)
            .unwrap()
            .remove(0);
        assert!(
            db.retry_or_fail(c.row, "p", "HTTP 500", 3 * MIN, 2, MIN)
                .unwrap()
        );
        assert!(
            db.claim_due("p", 2 * MIN, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        assert_eq!(db.next_ready_ms(&everyone()).unwrap(), Some(3 * MIN));
        let c = db
            .claim_due("p", 3 * MIN, MIN, 10, &everyone(), 9)
            .unwrap()
            .remove(0);
        assert_eq!(c.attempt, 2);
        assert!(
            db.retry_or_fail(c.row, "p", "HTTP 502", 5 * MIN, 2, 3 * MIN)
                .unwrap()
        );
        let all = db.list("alice", ListFilter::All, 10).unwrap();
        assert_eq!(all.followups[0].status, Status::Failed);
        assert_eq!(all.followups[0].attempts, 2);
        assert_eq!(all.followups[0].last_error.as_deref(), Some("HTTP 502"));
        assert!(
            db.claim_due("p", 9 * MIN, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        // Quiet hours: held without counting an attempt.
        db.schedule("alice", "y", MIN, 0).unwrap();
        let c = db
            .claim_due("p", 10 * MIN, MIN, 10, &everyone(), 9)
            .unwrap()
            .remove(0);
        assert!(db.hold(c.row, "p", 20 * MIN, 10 * MIN).unwrap());
        assert!(
            db.claim_due("p", 19 * MIN, MIN, 10, &everyone(), 9)
                .unwrap()
                .is_empty()
        );
        let c = db
            .claim_due("p", 20 * MIN, MIN, 10, &everyone(), 9)
            .unwrap()
            .remove(0);
        assert_eq!(c.attempt, 1);
    }

    fn only_users_with_proactive_messages_are_claimed(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "a", MIN, 0).unwrap();
        db.schedule("bob", "b", MIN, 0).unwrap();
        let users = |d: &Deliverable| {
            let mut u: Vec<String> = db
                .claim_due("p", MIN, MIN, 10, d, 9)
                .unwrap()
                .into_iter()
                .map(|c| c.user)
                .collect();
            u.sort();
            u
        };
        assert!(users(&Deliverable::Only(Vec::new())).is_empty());
        assert_eq!(
            users(&Deliverable::AllBut(vec!["bob".into()])),
            vec!["alice"]
        );
        assert_eq!(users(&Deliverable::Only(vec!["bob".into()])), vec!["bob"]);
    }

    fn an_export_imports_into_another_database_once(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "a", MIN, 0).unwrap();
        db.schedule("alice", "b", 2 * MIN, 0).unwrap();
        db.cancel("alice", 2, Some("done"), 1).unwrap();
        db.schedule("bob", "c", MIN, 0).unwrap();
        let c = db
            .claim_due("p", MIN, MIN, 10, &Deliverable::Only(vec!["bob".into()]), 9)
            .unwrap();
        assert_eq!(c.len(), 1);
        let all = db.export(None).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(db.export(Some("bob")).unwrap().len(), 1);
        let (_d2, other) = t.another();
        other.schedule("alice", "already here", MIN, 0).unwrap();
        let report = other.import(&all, None).unwrap();
        assert_eq!(
            report,
            ImportReport {
                imported: 3,
                skipped: 0
            }
        );
        // Again: nothing new.
        assert_eq!(
            other.import(&all, None).unwrap(),
            ImportReport {
                imported: 0,
                skipped: 3
            }
        );
        let alice = other.list("alice", ListFilter::All, 10).unwrap();
        // Numbered after what was there; the cancelled one keeps its reason.
        let mut got: Vec<(i64, String, Status)> = alice
            .followups
            .iter()
            .map(|f| (f.id, f.context.clone(), f.status))
            .collect();
        got.sort_by_key(|g| g.0);
        assert_eq!(
            got,
            vec![
                (1, "already here".into(), Status::Pending),
                (2, "a".into(), Status::Pending),
                (3, "b".into(), Status::Cancelled)
            ]
        );
        // Bob's was being delivered: pending again, to be claimed afresh.
        let bob = other.list("bob", ListFilter::All, 10).unwrap();
        assert_eq!(bob.followups[0].status, Status::Pending);
        // Imported for another user.
        let (_d3, third) = t.another();
        third.import(&all, Some("carol")).unwrap();
        assert_eq!(third.list("carol", ListFilter::All, 10).unwrap().total, 3);
    }

    fn undeliverable_users_neither_wake_the_scheduler_nor_get_claimed(t: &dyn Bed) {
        let db = t.db();
        db.schedule("quiet", "a", MIN, 0).unwrap();
        db.schedule("alice", "b", 5 * MIN, 0).unwrap();
        let not_quiet = Deliverable::AllBut(vec!["quiet".into()]);
        // Only alice's row decides when to look again; nobody's means never.
        assert_eq!(db.next_ready_ms(&not_quiet).unwrap(), Some(5 * MIN));
        assert_eq!(
            db.next_ready_ms(&Deliverable::Only(Vec::new())).unwrap(),
            None
        );
        assert!(
            db.claim_due("p", 2 * MIN, MIN, 10, &not_quiet, 9)
                .unwrap()
                .is_empty()
        );
    }

    fn a_claim_abandoned_too_often_fails_and_an_abandoned_one_can_be_cancelled(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "crashes its deliverer", MIN, 0)
            .unwrap();
        db.schedule("alice", "cancel me", MIN, 0).unwrap();
        // Both claimed; the process dies twice.
        assert_eq!(
            db.claim_due("p1", MIN, MIN, 10, &everyone(), 2)
                .unwrap()
                .len(),
            2
        );
        assert!(matches!(
            db.cancel("alice", 2, None, MIN + 1).unwrap(),
            ChangeOutcome::NotPending(_)
        ));
        // After the lease, the abandoned claim may be cancelled.
        assert!(matches!(
            db.cancel("alice", 2, Some("stale"), 2 * MIN).unwrap(),
            ChangeOutcome::Changed(f) if f.status == Status::Cancelled
        ));
        let again = db
            .claim_due("p2", 2 * MIN, MIN, 10, &everyone(), 2)
            .unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].attempt, 2);
        // Abandoned again at the limit: failed, not claimed a third time.
        assert!(
            db.claim_due("p3", 3 * MIN, MIN, 10, &everyone(), 2)
                .unwrap()
                .is_empty()
        );
        let f = &db.list("alice", ListFilter::All, 10).unwrap().followups[1];
        assert_eq!(f.status, Status::Failed);
        assert!(
            f.last_error
                .as_deref()
                .unwrap()
                .contains("stopped before it finished, 2 times")
        );
    }

    fn a_new_time_starts_the_attempts_afresh_and_bad_imports_store_nothing(t: &dyn Bed) {
        let db = t.db();
        db.schedule("alice", "x", MIN, 0).unwrap();
        let c = db
            .claim_due("p", MIN, MIN, 10, &everyone(), 9)
            .unwrap()
            .remove(0);
        db.retry_or_fail(c.row, "p", "HTTP 500", 2 * MIN, 9, MIN)
            .unwrap();
        let ChangeOutcome::Changed(f) = db.update("alice", 1, None, Some(10 * MIN), MIN).unwrap()
        else {
            panic!("not changed")
        };
        assert_eq!((f.attempts, f.last_error), (0, None));
        let mut records = db.export(None).unwrap();
        records[0].idempotency_key = "rf-followup-other".into();
        let mut empty = records[0].clone();
        empty.context = "  ".into();
        empty.idempotency_key = "rf-followup-empty".into();
        let (_d2, other) = t.another();
        let e = other
            .import(&[records[0].clone(), empty], None)
            .unwrap_err();
        assert!(e.to_string().contains("record 2: the context"), "{e}");
        assert_eq!(
            other.export(None).unwrap().len(),
            0,
            "a bad import stored something"
        );
    }

    fn processes_sharing_the_file_claim_each_follow_up_once(t: &dyn Bed) {
        let db = t.db();
        for i in 0..1000 {
            db.schedule(&format!("u{}", i % 7), "x", MIN, 0).unwrap();
        }
        let claimed: Vec<Vec<i64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|p| {
                    s.spawn(move || {
                        let db = t.db();
                        let owner = format!("p{p}");
                        let mut rows = Vec::new();
                        loop {
                            let batch = db
                                .claim_due(&owner, MIN, 60 * MIN, 25, &everyone(), 9)
                                .unwrap();
                            if batch.is_empty() {
                                break;
                            }
                            for c in batch {
                                assert!(db.complete(c.row, &owner, "test", MIN).unwrap());
                                rows.push(c.row);
                            }
                        }
                        rows
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<i64> = claimed.concat();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(
            (n, all.len()),
            (1000, 1000),
            "a follow-up was claimed twice or never"
        );
    }

    fn a_persons_choices_are_kept_replaced_and_removed(t: &dyn Bed) {
        let db = t.db();
        assert_eq!(db.choices().unwrap(), []);
        assert_eq!(db.choices_of("alice").unwrap(), None);
        let on = Choices {
            proactive: Some(true),
            timezone: Some("Europe/Berlin".into()),
            quiet_hours: Some(String::new()),
        };
        db.set_choices("alice", &on, MIN).unwrap();
        let off = Choices {
            proactive: Some(false),
            ..Choices::default()
        };
        db.set_choices("bob", &off, MIN).unwrap();
        // Another handle (another process) reads them.
        let other = t.db();
        assert_eq!(other.choices_of("alice").unwrap().as_ref(), Some(&on));
        assert_eq!(
            other.choices().unwrap(),
            [("alice".to_owned(), on.clone()), ("bob".to_owned(), off)]
        );
        // Saving replaces every choice; all of them empty removes the row.
        let quiet = Choices {
            quiet_hours: Some("22:00-07:00".into()),
            ..Choices::default()
        };
        db.set_choices("alice", &quiet, 2 * MIN).unwrap();
        assert_eq!(other.choices_of("alice").unwrap(), Some(quiet));
        db.set_choices("bob", &Choices::default(), 2 * MIN).unwrap();
        assert_eq!(other.choices_of("bob").unwrap(), None);
        assert_eq!(other.choices().unwrap().len(), 1);
    }
}
