//! Throwaway databases for tests: each [`ScratchDb`] is a new database in the cluster that
//! `RINGFENCE_TEST_DATABASE_URL` names (`scripts/postgres.sh` starts one; `scripts/test.sh`
//! sets the variable), dropped again when the value is.

#![allow(clippy::print_stderr)] // test tooling: it speaks to the test's own output

use super::{Pg, PgOptions};

/// The cluster the tests use (a database URL whose user may create databases).
pub const TEST_URL_VAR: &str = "RINGFENCE_TEST_DATABASE_URL";
/// Set (to anything) where PostgreSQL must be tested: a test then fails instead of being
/// skipped when the cluster is missing.
pub const REQUIRE_VAR: &str = "RINGFENCE_REQUIRE_POSTGRES";

/// A new, empty database; dropped with the value.
#[derive(Debug)]
pub struct ScratchDb {
    url: String,
    name: String,
    admin: Pg,
}

impl ScratchDb {
    /// A new database, or `None` (after saying so on stderr) when no test cluster is set
    /// and none is required.
    pub fn new() -> Option<ScratchDb> {
        let Ok(base) = std::env::var(TEST_URL_VAR) else {
            assert!(
                std::env::var_os(REQUIRE_VAR).is_none(),
                "{REQUIRE_VAR} is set but {TEST_URL_VAR} is not: start a cluster with scripts/postgres.sh"
            );
            eprintln!("skipped: no PostgreSQL ({TEST_URL_VAR} is not set)");
            return None;
        };
        let admin = Pg::connect(&PgOptions {
            pool_size: 2,
            ..PgOptions::new(base.clone())
        })
        .unwrap_or_else(|e| panic!("{TEST_URL_VAR}: {e}"));
        let name = format!("rf_test_{}", uuid::Uuid::new_v4().simple());
        admin
            .run(async |c| Ok(c.batch_execute(&format!("CREATE DATABASE {name}")).await?))
            .unwrap_or_else(|e| panic!("cannot create a test database: {e}"));
        Some(ScratchDb {
            url: with_database(&base, &name),
            name,
            admin,
        })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A pool on the database.
    pub fn connect(&self) -> Pg {
        Pg::connect(&PgOptions::new(self.url.clone())).expect("the scratch database")
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let name = &self.name;
        if let Err(e) = self.admin.run(async |c| {
            Ok(
                c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?,
            )
        }) {
            eprintln!("cannot drop the test database {name}: {e}");
        }
    }
}

/// `url` naming the database `name` instead (URL form: the path; key=value form: dbname).
fn with_database(url: &str, name: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    {
        let scheme = &url[..url.len() - rest.len()];
        let (before_query, query) = match rest.find('?') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let authority = before_query.split('/').next().unwrap_or(before_query);
        format!("{scheme}{authority}/{name}{query}")
    } else {
        format!("{url} dbname={name}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_database_is_replaced_in_either_form() {
        use super::with_database as w;
        assert_eq!(w("postgres://u:p@h:1/db", "x"), "postgres://u:p@h:1/x");
        assert_eq!(
            w("postgresql://u@h/db?sslmode=disable", "x"),
            "postgresql://u@h/x?sslmode=disable"
        );
        assert_eq!(w("postgres://h", "x"), "postgres://h/x");
        assert_eq!(
            w("host=h user=u dbname=db", "x"),
            "host=h user=u dbname=db dbname=x"
        );
    }
}
