//! `[store]`: where ringfence keeps its state. SQLite files under the data directory (the
//! default), or one PostgreSQL database that several instances share.

use std::path::PathBuf;
use std::time::Duration;

use super::raw::StoreTable;
use super::{ConfigError, Env};
use crate::env_vars;

/// The resolved `[store]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StoreSettings {
    /// One SQLite file per family under the data directory.
    #[default]
    Sqlite,
    Postgres(PgSettings),
}

/// How to reach PostgreSQL.
#[derive(Clone, PartialEq, Eq)]
pub struct PgSettings {
    pub url: String,
    pub pool_size: usize,
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// `None`: statements run as long as they take.
    pub statement_timeout: Option<Duration>,
}

impl PgSettings {
    /// The pool's options (`url` instead of the configured one when given).
    pub fn options(&self, url: Option<String>) -> ringfence_store::pg::PgOptions {
        ringfence_store::pg::PgOptions {
            url: url.unwrap_or_else(|| self.url.clone()),
            pool_size: self.pool_size,
            ca_file: self.ca_file.clone(),
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
        }
    }
}

impl StoreSettings {
    /// The store of one process under these settings (nothing connected yet).
    pub fn shared_store(&self) -> ringfence_store::SharedStore {
        ringfence_store::SharedStore::new(match self {
            StoreSettings::Sqlite => None,
            StoreSettings::Postgres(s) => Some(s.options(None)),
        })
    }
}

impl std::fmt::Debug for PgSettings {
    // The URL may hold a password: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSettings")
            .field("pool_size", &self.pool_size)
            .field("ca_file", &self.ca_file)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .finish_non_exhaustive()
    }
}

/// Resolves `[store]`, then `RINGFENCE_STORE_BACKEND` and `RINGFENCE_DATABASE_URL`. A URL
/// (in either place) makes PostgreSQL the backend unless `backend` says otherwise.
pub fn resolve(table: Option<&StoreTable>, env: &dyn Env) -> Result<StoreSettings, ConfigError> {
    let default = StoreTable::default();
    let t = table.unwrap_or(&default);
    let from_env = |key: &str| {
        env.get(key)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let url = from_env(env_vars::RINGFENCE_DATABASE_URL).or_else(|| t.url.clone());
    let (backend, key) = match from_env(env_vars::RINGFENCE_STORE_BACKEND) {
        Some(b) => (Some(b), env_vars::RINGFENCE_STORE_BACKEND.to_owned()),
        None => (t.backend.clone(), "store.backend".to_owned()),
    };
    let postgres = match backend.as_deref() {
        Some("sqlite") => false,
        Some("postgres") => true,
        None => url.is_some(),
        Some(other) => {
            return Err(ConfigError::invalid(
                key,
                format!("`{other}` is not \"sqlite\" or \"postgres\""),
            ));
        }
    };
    if !postgres {
        for (name, set) in [
            ("pool_size", t.pool_size.is_some()),
            ("ca_file", t.ca_file.is_some()),
            ("connect_timeout_secs", t.connect_timeout_secs.is_some()),
            ("statement_timeout_secs", t.statement_timeout_secs.is_some()),
        ] {
            if set {
                return Err(ConfigError::invalid(
                    format!("store.{name}"),
                    "applies only to backend = \"postgres\"",
                ));
            }
        }
        return Ok(StoreSettings::Sqlite);
    }
    let Some(url) = url else {
        return Err(ConfigError::invalid(
            "store.url",
            format!(
                "missing: backend = \"postgres\" needs the database's URL (url = \"postgres://user:password@host:5432/ringfence\", or {})",
                env_vars::RINGFENCE_DATABASE_URL
            ),
        ));
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://") || url.contains('=')) {
        return Err(ConfigError::invalid(
            "store.url",
            "is not a PostgreSQL URL: postgres://user:password@host:5432/database (or libpq's key=value form)",
        ));
    }
    let pool_size = match t.pool_size {
        None => 16,
        Some(n @ 1..=1000) => n as usize,
        Some(n) => {
            return Err(ConfigError::invalid(
                "store.pool_size",
                format!("{n} is out of range: 1 to 1000"),
            ));
        }
    };
    let connect_timeout = match t.connect_timeout_secs {
        None => Duration::from_secs(10),
        Some(n @ 1..=600) => Duration::from_secs(n),
        Some(n) => {
            return Err(ConfigError::invalid(
                "store.connect_timeout_secs",
                format!("{n} is out of range: 1 to 600"),
            ));
        }
    };
    let statement_timeout = match t.statement_timeout_secs {
        None => Some(Duration::from_secs(60)),
        Some(0) => None,
        Some(n @ 1..=86_400) => Some(Duration::from_secs(n)),
        Some(n) => {
            return Err(ConfigError::invalid(
                "store.statement_timeout_secs",
                format!("{n} is out of range: 1 to 86400 (0: no limit)"),
            ));
        }
    };
    if let Some(ca) = &t.ca_file
        && !ca.is_absolute()
    {
        return Err(ConfigError::not_absolute("store.ca_file", ca));
    }
    Ok(StoreSettings::Postgres(PgSettings {
        url,
        pool_size,
        ca_file: t.ca_file.clone(),
        connect_timeout,
        statement_timeout,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn table(toml_text: &str) -> StoreTable {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn sqlite_by_default_postgres_with_a_url() {
        assert_eq!(resolve(None, &env(&[])).unwrap(), StoreSettings::Sqlite);
        let StoreSettings::Postgres(pg) = resolve(
            None,
            &env(&[("RINGFENCE_DATABASE_URL", "postgres://u:p@h/db")]),
        )
        .unwrap() else {
            panic!("not postgres")
        };
        assert_eq!((pg.url.as_str(), pg.pool_size), ("postgres://u:p@h/db", 16));
        assert!(
            !format!("{pg:?}").contains("u:p"),
            "the password stays out of logs"
        );
        // The variable wins over the file's URL; the backend variable over both.
        let t = table("url = \"postgres://file/db\"\npool_size = 4");
        let StoreSettings::Postgres(pg) = resolve(
            Some(&t),
            &env(&[("RINGFENCE_DATABASE_URL", "postgres://env/db")]),
        )
        .unwrap() else {
            panic!("not postgres")
        };
        assert_eq!((pg.url.as_str(), pg.pool_size), ("postgres://env/db", 4));
        assert_eq!(pg.statement_timeout, Some(Duration::from_secs(60)));
        let t = table("url = \"postgres://file/db\"\nstatement_timeout_secs = 0");
        let StoreSettings::Postgres(pg) = resolve(Some(&t), &env(&[])).unwrap() else {
            panic!("not postgres")
        };
        assert_eq!(pg.statement_timeout, None);
        let t = table("url = \"postgres://file/db\"");
        assert_eq!(
            resolve(Some(&t), &env(&[("RINGFENCE_STORE_BACKEND", "sqlite")])).unwrap(),
            StoreSettings::Sqlite
        );
    }

    #[test]
    fn mistakes_name_the_key() {
        let cases = [
            ("backend = \"mysql\"", "store.backend"),
            ("backend = \"postgres\"", "store.url"),
            ("url = \"mysql://h/db\"", "store.url"),
            (
                "url = \"postgres://h/db\"\npool_size = 0",
                "store.pool_size",
            ),
            (
                "url = \"postgres://h/db\"\nconnect_timeout_secs = 0",
                "store.connect_timeout_secs",
            ),
            (
                "url = \"postgres://h/db\"\nca_file = \"ca.pem\"",
                "store.ca_file",
            ),
            (
                "url = \"postgres://h/db\"\nstatement_timeout_secs = 100000",
                "store.statement_timeout_secs",
            ),
            ("statement_timeout_secs = 5", "store.statement_timeout_secs"),
            ("pool_size = 3", "store.pool_size"),
        ];
        for (text, key) in cases {
            let err = resolve(Some(&table(text)), &env(&[])).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        let err = resolve(None, &env(&[("RINGFENCE_STORE_BACKEND", "x")])).unwrap_err();
        assert!(err.to_string().contains("RINGFENCE_STORE_BACKEND"), "{err}");
    }
}
