use std::time::Duration;

use super::scratch::ScratchDb;
use super::*;

const SCHEMA: Schema = Schema {
    name: "test",
    migrations: &[
        "CREATE TABLE a (id BIGINT PRIMARY KEY)",
        "ALTER TABLE a ADD COLUMN note TEXT",
    ],
};

#[test]
fn migrates_once_and_refuses_a_newer_schema() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = db.connect();
    assert_eq!(pg.schema_version("test").unwrap(), 0);
    // Four instances starting at once: each sees the schema at version 2, none fails.
    let versions: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| db.connect().migrate(&SCHEMA).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(versions, [2, 2, 2, 2]);
    assert_eq!(pg.schema_version("test").unwrap(), 2);
    pg.run(async |c| {
        Ok(c.execute("INSERT INTO a (id, note) VALUES (1, 'x')", &[])
            .await?)
    })
    .unwrap();
    // A ringfence that knows only the first step refuses the database.
    static OLDER: Schema = Schema {
        name: "test",
        migrations: &["CREATE TABLE a (id BIGINT PRIMARY KEY)"],
    };
    let err = pg.migrate(&OLDER).unwrap_err();
    assert!(
        err.to_string()
            .contains("schema version 2, newer than this ringfence knows (1)"),
        "{err}"
    );
}

#[test]
fn a_failed_step_leaves_the_version_before_it() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = db.connect();
    static BROKEN: Schema = Schema {
        name: "broken",
        migrations: &["CREATE TABLE b (id BIGINT)", "CREATE TABLE b (id BIGINT)"],
    };
    let err = pg.migrate(&BROKEN).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot migrate the broken tables in PostgreSQL to schema version 2: relation \"b\" already exists (42P07)"),
        "{err}"
    );
    assert_eq!(pg.schema_version("broken").unwrap(), 1);
}

#[test]
fn a_busy_pool_waits_then_says_so() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = Pg::connect(&PgOptions {
        pool_size: 1,
        connect_timeout: Duration::from_millis(300),
        ..PgOptions::new(db.url())
    })
    .unwrap();
    let pg = &pg;
    std::thread::scope(|s| {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let holder = s.spawn(move || {
            pg.run(async |_| {
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                Ok(())
            })
        });
        held_rx.recv().unwrap();
        let err = pg.run(async |_| Ok(())).unwrap_err();
        assert!(
            err.to_string().contains("all 1 PostgreSQL connections"),
            "{err}"
        );
        go_tx.send(()).unwrap();
        holder.join().unwrap().unwrap();
    });
    // Freed: the next call gets the connection.
    let one: i32 = pg
        .run(async |c| Ok(c.query_one("SELECT 1", &[]).await?.get(0)))
        .unwrap();
    assert_eq!(one, 1);
}

#[test]
fn a_broken_connection_is_replaced() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = Pg::connect(&PgOptions {
        pool_size: 1,
        ..PgOptions::new(db.url())
    })
    .unwrap();
    let pid: i32 = pg
        .run(async |c| Ok(c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0)))
        .unwrap();
    // The server ends the pooled connection (as a restart or a failover would).
    let other = db.connect();
    other
        .run(async |c| {
            Ok(c.execute("SELECT pg_terminate_backend($1)", &[&pid])
                .await?)
        })
        .unwrap();
    // The next call may meet the dead connection once; after that a new one serves.
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(pg.run(async |c| {
            Ok(c.query_one("SELECT pg_backend_pid()", &[])
                .await?
                .get::<_, i32>(0))
        }));
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = answers.pop().unwrap().unwrap();
    assert_ne!(last, pid);
}

#[test]
fn errors_name_the_problem() {
    let err = Pg::connect(&PgOptions::new("mysql://x")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("store.url is not a PostgreSQL URL"),
        "{err}"
    );
    let err = Pg::connect(&PgOptions::new("postgres://u@127.0.0.1:1")).unwrap_err();
    assert!(err.to_string().contains("names no database"), "{err}");
    let err = Pg::connect(&PgOptions {
        connect_timeout: Duration::from_secs(2),
        ..PgOptions::new("postgres://u@127.0.0.1:1/db")
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot connect to PostgreSQL at u@127.0.0.1:1/db: "),
        "{err}"
    );
    let Some(db) = ScratchDb::new() else { return };
    let wrong = db.url().replacen("://ringfence:", "://ringfence:x", 1);
    if wrong != db.url() {
        let err = Pg::connect(&PgOptions::new(wrong)).unwrap_err();
        assert!(
            err.to_string().contains("password authentication failed"),
            "{err}"
        );
        assert!(
            !err.to_string().contains("x@"),
            "no password in messages: {err}"
        );
    }
}

#[test]
fn works_from_inside_an_async_runtime() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = db.connect();
    // A current-thread runtime: the call must not try to enter another runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let v: i64 = rt
        .block_on(async {
            pg.run(async |c| Ok(c.query_one("SELECT 41::BIGINT + 1", &[]).await?.get(0)))
        })
        .unwrap();
    assert_eq!(v, 42);
}

/// The test cluster's CA (`scripts/postgres.sh` makes one; its server certificate names
/// `localhost` only).
const CA_VAR: &str = "RINGFENCE_TEST_DATABASE_CA";

#[test]
fn tls_checks_the_certificate_and_its_name() {
    let Some(db) = ScratchDb::new() else { return };
    let Ok(ca) = std::env::var(CA_VAR) else {
        assert!(
            std::env::var_os(scratch::REQUIRE_VAR).is_none(),
            "{CA_VAR} is not set"
        );
        return;
    };
    let require = db.url().replace("sslmode=disable", "sslmode=require");
    assert!(require.contains("@127.0.0.1:"), "{require}");
    let by_name = require.replace("@127.0.0.1:", "@localhost:");
    let trusting = |url: &str| PgOptions {
        ca_file: Some(ca.clone().into()),
        ..PgOptions::new(url)
    };
    // The cluster's CA and the certificate's name: encrypted.
    let pg = Pg::connect(&trusting(&by_name)).unwrap();
    let ssl: bool = pg
        .run(async |c| {
            Ok(c.query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await?
            .get(0))
        })
        .unwrap();
    assert!(ssl);
    // The public roots do not vouch for a private CA: refused, not silently accepted.
    let err = Pg::connect(&PgOptions::new(by_name.clone())).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
    // The right CA, but a name the certificate does not hold.
    let err = Pg::connect(&trusting(&require)).unwrap_err();
    assert!(
        err.to_string()
            .contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    // `prefer` (the default) verifies too once the server offers TLS.
    let prefer = by_name.replace("sslmode=require", "sslmode=prefer");
    assert!(Pg::connect(&PgOptions::new(prefer)).is_err());
    // A CA file that is not one is named.
    let err = Pg::connect(&PgOptions {
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..PgOptions::new(by_name)
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("store.ca_file /nonexistent/ca.pem: "),
        "{err}"
    );
}

#[test]
fn a_statement_that_runs_too_long_is_cancelled_and_says_so() {
    let Some(db) = ScratchDb::new() else { return };
    let pg = Pg::connect(&PgOptions {
        statement_timeout: Some(Duration::from_millis(300)),
        ..PgOptions::new(db.url())
    })
    .unwrap();
    let err = pg
        .run(async |c| Ok(c.batch_execute("SELECT pg_sleep(30)").await?))
        .unwrap_err();
    assert!(err.to_string().contains("statement timeout"), "{err}");
    // The connection is fine afterwards.
    let one: i32 = pg
        .run(async |c| Ok(c.query_one("SELECT 1", &[]).await?.get(0)))
        .unwrap();
    assert_eq!(one, 1);
}

#[test]
fn a_prepared_statement_is_kept_and_prepared_again_after_a_schema_change() {
    let Some(db) = ScratchDb::new() else { return };
    // One connection, so the second use finds the statement the first prepared.
    let pg = Pg::connect(&PgOptions {
        pool_size: 1,
        ..PgOptions::new(db.url())
    })
    .unwrap();
    pg.run(async |c| {
        Ok(
            c.batch_execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1)")
                .await?,
        )
    })
    .unwrap();
    const ALL: &str = "SELECT * FROM t";
    let columns = |pg: &Pg| {
        pg.run_prepared(ALL, async |c, s| Ok(c.query_one(s, &[]).await?.len()))
            .unwrap()
    };
    assert_eq!(columns(&pg), 1);
    // Another instance migrates: the kept statement's result type changed.
    let other = db.connect();
    other
        .run(async |c| Ok(c.batch_execute("ALTER TABLE t ADD COLUMN b INT").await?))
        .unwrap();
    assert_eq!(columns(&pg), 2);
}
