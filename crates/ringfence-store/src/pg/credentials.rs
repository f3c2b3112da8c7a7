//! Logins ringfence keeps for users (the Google Calendar connection's refresh token) in
//! PostgreSQL, so every instance can use a connection made through any of them. With
//! SQLite they stay in files of the data directory (0600).

use super::Pg;
use crate::{Schema, StoreError};

/// The credentials table (the SQLite backend keeps files instead).
pub const CREDENTIALS_PG_SCHEMA: Schema = Schema {
    name: "credentials",
    migrations: &[
        // 1: one document per user and provider.
        "CREATE TABLE credentials (
            \"user\" TEXT NOT NULL,
            provider TEXT NOT NULL,
            doc TEXT NOT NULL,
            updated_ms BIGINT NOT NULL,
            PRIMARY KEY (\"user\", provider)
        );",
    ],
};

/// The credentials of a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgCredentials {
    pg: Pg,
}

impl PgCredentials {
    /// The credentials of `pg`, migrating their table first.
    pub fn open(pg: Pg) -> Result<PgCredentials, StoreError> {
        pg.migrate(&CREDENTIALS_PG_SCHEMA)?;
        Ok(PgCredentials { pg })
    }

    /// `user`'s document for `provider`, if one was saved.
    pub fn load(&self, user: &str, provider: &str) -> Result<Option<String>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query_opt(
                "SELECT doc FROM credentials WHERE \"user\" = $1 AND provider = $2",
                &[&user, &provider],
            )
            .await?
            .map(|r| r.get(0)))
        })
    }

    /// Forgets `user`'s document for `provider` (disconnecting).
    pub fn remove(&self, user: &str, provider: &str) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "DELETE FROM credentials WHERE \"user\" = $1 AND provider = $2",
                &[&user, &provider],
            )
            .await?;
            Ok(())
        })
    }

    /// Takes `user`'s document for `provider`: returns and deletes it in one statement, so
    /// of two instances taking it at once, one gets it.
    pub fn take(&self, user: &str, provider: &str) -> Result<Option<String>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query_opt(
                "DELETE FROM credentials WHERE \"user\" = $1 AND provider = $2 RETURNING doc",
                &[&user, &provider],
            )
            .await?
            .map(|r| r.get(0)))
        })
    }

    /// Saves (replacing) `user`'s document for `provider`.
    pub fn save(
        &self,
        user: &str,
        provider: &str,
        doc: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "INSERT INTO credentials (\"user\", provider, doc, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (\"user\", provider) DO UPDATE SET doc = excluded.doc,
                     updated_ms = excluded.updated_ms",
                &[&user, &provider, &doc, &now_ms],
            )
            .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_has_their_own_and_a_save_replaces() {
        let Some(db) = crate::pg::scratch::ScratchDb::new() else {
            return;
        };
        let (a, b) = (
            PgCredentials::open(db.connect()).unwrap(),
            PgCredentials::open(db.connect()).unwrap(),
        );
        assert_eq!(a.load("alice", "google").unwrap(), None);
        a.save("alice", "google", "{\"refresh_token\":\"1\"}", 1)
            .unwrap();
        b.save("alice", "google", "{\"refresh_token\":\"2\"}", 2)
            .unwrap();
        assert_eq!(
            a.load("alice", "google").unwrap().as_deref(),
            Some("{\"refresh_token\":\"2\"}")
        );
        assert_eq!(a.load("bob", "google").unwrap(), None);
        assert_eq!(a.load("alice", "other").unwrap(), None);
    }

    #[test]
    fn a_document_is_taken_by_one_taker() {
        let Some(db) = crate::pg::scratch::ScratchDb::new() else {
            return;
        };
        let store = PgCredentials::open(db.connect()).unwrap();
        store.save("alice", "google.pending", "doc", 1).unwrap();
        let takers: Vec<_> = (0..4)
            .map(|_| PgCredentials::open(db.connect()).unwrap())
            .collect();
        let got: Vec<Option<String>> = std::thread::scope(|s| {
            let running: Vec<_> = takers
                .iter()
                .map(|t| s.spawn(move || t.take("alice", "google.pending").unwrap()))
                .collect();
            running.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got.iter().flatten().collect::<Vec<_>>(), ["doc"]);
        assert_eq!(store.load("alice", "google.pending").unwrap(), None);
    }
}
