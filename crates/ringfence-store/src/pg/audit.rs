//! The audit trail in PostgreSQL: every instance's tool calls in one table, beside each
//! instance's JSON-lines file, so `ringfence audit` answers for the whole deployment.

use super::Pg;
use crate::{Schema, StoreError};

/// The audit table (the SQLite backend has none: its trail is the JSON-lines file).
pub const AUDIT_PG_SCHEMA: Schema = Schema {
    name: "audit",
    migrations: &[
        // 1: one row per call, the line as the file has it, and the columns it is found by.
        "CREATE TABLE audit_log (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            time TEXT NOT NULL,
            \"user\" TEXT NOT NULL,
            session TEXT NOT NULL,
            tool TEXT NOT NULL,
            outcome TEXT NOT NULL,
            line TEXT NOT NULL
        );
        CREATE INDEX audit_log_time ON audit_log (time, id);
        CREATE INDEX audit_log_user ON audit_log (\"user\", time);",
    ],
};

/// One audited call: the JSON line and the fields it is selected by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    /// RFC 3339 UTC with milliseconds (so times compare as strings).
    pub time: String,
    pub user: String,
    pub session: String,
    pub tool: String,
    pub outcome: String,
    pub line: String,
}

/// Which lines `ringfence audit` prints: every filter given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub user: Option<String>,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    pub session: Option<String>,
    /// At or after this time (an RFC 3339 prefix such as `2026-12-02`).
    pub since: Option<String>,
    /// Before this time.
    pub until: Option<String>,
}

/// Lines read per round trip when querying.
const PAGE: i32 = 1000;

/// The audit table of a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgAudit {
    pg: Pg,
}

impl PgAudit {
    /// The audit table of `pg`, migrating it first.
    pub fn open(pg: Pg) -> Result<PgAudit, StoreError> {
        pg.migrate(&AUDIT_PG_SCHEMA)?;
        Ok(PgAudit { pg })
    }

    /// Stores `lines` in one transaction.
    pub fn append(&self, lines: &[AuditLine]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        self.pg.transaction(async |tx| {
            let insert = tx
                .prepare(
                    "INSERT INTO audit_log (time, \"user\", session, tool, outcome, line)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .await?;
            for l in lines {
                tx.execute(
                    &insert,
                    &[&l.time, &l.user, &l.session, &l.tool, &l.outcome, &l.line],
                )
                .await?;
            }
            Ok(())
        })
    }

    /// Gives `out` the matching lines, oldest first; returns how many.
    pub fn query(&self, f: &AuditFilter, out: &mut dyn FnMut(&str)) -> Result<usize, StoreError> {
        let mut n = 0;
        self.pg.transaction(async |tx| {
            let portal = tx
                .bind(
                    "SELECT line FROM audit_log
                     WHERE ($1::TEXT IS NULL OR \"user\" = $1)
                       AND ($2::TEXT IS NULL OR tool = $2)
                       AND ($3::TEXT IS NULL OR outcome = $3)
                       AND ($4::TEXT IS NULL OR session = $4)
                       AND ($5::TEXT IS NULL OR time >= $5)
                       AND ($6::TEXT IS NULL OR time < $6)
                     ORDER BY time, id",
                    &[&f.user, &f.tool, &f.outcome, &f.session, &f.since, &f.until],
                )
                .await?;
            loop {
                let rows = tx.query_portal(&portal, PAGE).await?;
                if rows.is_empty() {
                    return Ok(());
                }
                for r in &rows {
                    out(r.get(0));
                    n += 1;
                }
            }
        })?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::scratch::ScratchDb;

    fn line(time: &str, user: &str, tool: &str, outcome: &str) -> AuditLine {
        AuditLine {
            time: time.into(),
            user: user.into(),
            session: format!("s-{user}"),
            tool: tool.into(),
            outcome: outcome.into(),
            line: format!("{{\"time\":\"{time}\",\"user\":\"{user}\",\"tool\":\"{tool}\"}}"),
        }
    }

    #[test]
    fn lines_come_back_in_time_order_by_every_filter() {
        let Some(db) = ScratchDb::new() else { return };
        // Two instances writing into one table.
        let (a, b) = (
            PgAudit::open(db.connect()).unwrap(),
            PgAudit::open(db.connect()).unwrap(),
        );
        a.append(&[
            line("2026-12-02T10:00:00.000Z", "alice", "read_file", "ok"),
            line("2026-12-02T12:00:00.000Z", "alice", "write_file", "error"),
        ])
        .unwrap();
        b.append(&[line("2026-12-02T11:00:00.000Z", "bob", "read_file", "ok")])
            .unwrap();
        let all = |f: AuditFilter| {
            let mut got = Vec::new();
            let n = a.query(&f, &mut |l| got.push(l.to_owned())).unwrap();
            assert_eq!(n, got.len());
            got
        };
        let every = all(AuditFilter::default());
        assert_eq!(every.len(), 3);
        assert!(
            every[1].contains("bob"),
            "ordered by time across instances: {every:?}"
        );
        let f = AuditFilter {
            user: Some("alice".into()),
            ..AuditFilter::default()
        };
        assert_eq!(all(f).len(), 2);
        let f = AuditFilter {
            outcome: Some("error".into()),
            ..AuditFilter::default()
        };
        assert!(all(f)[0].contains("write_file"));
        let f = AuditFilter {
            since: Some("2026-12-02T10:30".into()),
            until: Some("2026-12-02T12".into()),
            ..AuditFilter::default()
        };
        assert_eq!(all(f).len(), 1);
        let f = AuditFilter {
            session: Some("s-bob".into()),
            tool: Some("read_file".into()),
            ..AuditFilter::default()
        };
        assert_eq!(all(f).len(), 1);
    }
}
