//! Moving state between the backends: every row of a family's SQLite file into PostgreSQL,
//! or back (`ringfence store migrate`, over the tables each family registers).
//!
//! Both sides are migrated to the current schema first (the step numbering is the same, so
//! the tables are too). A table's columns and their kinds are read from the SQLite schema,
//! so a registration names only the table, its key and its numbered column. Rows stream
//! from the source and are written in batches of [`BATCH`], one transaction each; a row
//! whose key is already in the target is left as it is, so a copy that was interrupted is
//! resumed by running it again. At the end each table's rows are counted on both sides:
//! fewer in the target is an error.

use std::path::PathBuf;

use rusqlite::types::Value;
use tokio_postgres::types::ToSql;

use super::Pg;
use crate::{Durability, Schema, Store, StoreError};

/// Rows per transaction on the target.
pub const BATCH: usize = 500;

/// How a column is carried across.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Text,
    Bytes,
}

/// One table: its name, key and the identity column PostgreSQL numbers (its columns are
/// read from the SQLite schema).
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// Its name in PostgreSQL, where that differs (a shared database names tables by
    /// family).
    pub renamed: Option<&'static str>,
    /// The primary key's columns (rows already in the target are skipped by it).
    pub key: &'static [&'static str],
    /// A column PostgreSQL fills from a sequence, moved past the copied rows afterwards.
    pub identity: Option<&'static str>,
}

/// One family's state: its schemas, its tables and where its SQLite file is.
#[derive(Debug)]
pub struct Family {
    pub sqlite: &'static Schema,
    pub postgres: &'static Schema,
    pub tables: &'static [Table],
    /// Its SQLite file.
    pub file: PathBuf,
    pub durability: Durability,
}

/// What a copy did for one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    /// Rows read from the source.
    pub read: u64,
    /// Rows written (the rest were in the target already).
    pub written: u64,
    /// Rows in the target afterwards.
    pub in_target: u64,
}

/// Which way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    SqliteToPostgres,
    PostgresToSqlite,
}

impl Table {
    /// Its name in PostgreSQL.
    pub fn pg_name(&self) -> &'static str {
        self.renamed.unwrap_or(self.name)
    }
}

fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// A table's columns as the SQLite schema declares them, each with its kind.
pub type Columns = Vec<(String, Kind)>;

fn column_list(columns: &Columns) -> String {
    columns
        .iter()
        .map(|(c, _)| quoted(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns of `table` in the SQLite file, in their order, with the kind each declares
/// (`INTEGER`, `TEXT` or `BLOB`; any other declaration is refused, naming the column).
pub fn columns(sqlite: &Store, table: &str) -> Result<Columns, StoreError> {
    let conn = sqlite.conn();
    let mut info = conn.prepare("SELECT name, type FROM pragma_table_info(?1) ORDER BY cid")?;
    let declared = info
        .query_map([table], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    if declared.is_empty() {
        return Err(StoreError::InvalidRecord(format!(
            "table {table} is not in {}",
            sqlite.path().display()
        )));
    }
    declared
        .into_iter()
        .map(|(name, ty)| {
            let kind = match ty.to_ascii_uppercase().as_str() {
                "INTEGER" => Kind::Int,
                "TEXT" => Kind::Text,
                "BLOB" => Kind::Bytes,
                other => {
                    return Err(StoreError::InvalidRecord(format!(
                        "column {table}.{name} is declared `{other}`; a copied column must be INTEGER, TEXT or BLOB"
                    )));
                }
            };
            Ok((name, kind))
        })
        .collect()
}

fn key_list(t: &Table) -> String {
    t.key
        .iter()
        .map(|c| quoted(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Copies every table of `family` in `direction`, telling `progress` (table, rows so far)
/// after each batch.
pub fn copy_family(
    family: &Family,
    pg: &Pg,
    direction: Direction,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Vec<Copied>, StoreError> {
    let sqlite = crate::open_file(&family.file, family.durability, family.sqlite)?;
    pg.migrate(family.postgres)?;
    let mut report = Vec::new();
    for table in family.tables {
        let cols = columns(&sqlite, table.name)?;
        let (read, written) = match direction {
            Direction::SqliteToPostgres => sqlite_to_pg(&sqlite, pg, table, &cols, progress)?,
            Direction::PostgresToSqlite => pg_to_sqlite(pg, &sqlite, table, &cols, progress)?,
        };
        if let (Direction::SqliteToPostgres, Some(id)) = (direction, table.identity) {
            // New rows numbered by PostgreSQL must come after the copied ones.
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{0}', '{id}'),
                     GREATEST((SELECT max({id}) FROM {0}), 1))",
                table.pg_name()
            );
            pg.run(async |c| Ok(c.batch_execute(&sql).await?))?;
        }
        let count = |name: &str| format!("SELECT count(*) FROM {name}");
        let in_sqlite: i64 = sqlite
            .conn()
            .query_row(&count(table.name), [], |r| r.get(0))?;
        let pg_count = count(table.pg_name());
        let in_pg: i64 = pg.run(async |c| Ok(c.query_one(&pg_count, &[]).await?.get(0)))?;
        let (source, target) = match direction {
            Direction::SqliteToPostgres => (in_sqlite, in_pg),
            Direction::PostgresToSqlite => (in_pg, in_sqlite),
        };
        if target < source {
            return Err(StoreError::InvalidRecord(format!(
                "table {}: {source} rows in the source but {target} in the target after the copy",
                table.name
            )));
        }
        report.push(Copied {
            table: table.name,
            read,
            written,
            in_target: target as u64,
        });
    }
    Ok(report)
}

/// A SQLite value as the parameter of a PostgreSQL column of `kind`.
fn to_pg(value: Value, kind: Kind) -> Result<Box<dyn ToSql + Sync + Send>, StoreError> {
    let bad = |what: &str| StoreError::InvalidRecord(format!("a {what} where {kind:?} belongs"));
    Ok(match (value, kind) {
        (Value::Null, Kind::Int) => Box::new(None::<i64>),
        (Value::Null, Kind::Text) => Box::new(None::<String>),
        (Value::Null, Kind::Bytes) => Box::new(None::<Vec<u8>>),
        (Value::Integer(i), Kind::Int) => Box::new(i),
        (Value::Text(s), Kind::Text) => Box::new(s),
        (Value::Blob(b), Kind::Bytes) => Box::new(b),
        (Value::Real(_), _) => return Err(bad("real number")),
        (Value::Integer(_), _) => return Err(bad("number")),
        (Value::Text(_), _) => return Err(bad("text")),
        (Value::Blob(_), _) => return Err(bad("blob")),
    })
}

fn sqlite_to_pg(
    sqlite: &Store,
    pg: &Pg,
    table: &Table,
    cols: &Columns,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<(u64, u64), StoreError> {
    let columns = column_list(cols);
    let params: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    let insert = format!(
        "INSERT INTO {} ({columns}) VALUES ({}) ON CONFLICT DO NOTHING",
        table.pg_name(),
        params.join(", ")
    );
    let conn = sqlite.conn();
    let mut select = conn.prepare(&format!(
        "SELECT {columns} FROM {} ORDER BY {}",
        table.name,
        key_list(table)
    ))?;
    let mut rows = select.query([])?;
    let (mut read, mut written) = (0u64, 0u64);
    let mut batch: Vec<Vec<Box<dyn ToSql + Sync + Send>>> = Vec::with_capacity(BATCH);
    loop {
        let row = rows.next()?;
        if let Some(row) = row {
            let mut values = Vec::with_capacity(cols.len());
            for (i, (_, kind)) in cols.iter().enumerate() {
                values.push(to_pg(row.get::<_, Value>(i)?, *kind)?);
            }
            batch.push(values);
            read += 1;
        }
        if batch.len() == BATCH || (row.is_none() && !batch.is_empty()) {
            let rows_of_batch = std::mem::take(&mut batch);
            written += pg.transaction(async |tx| {
                let statement = tx.prepare(&insert).await?;
                let mut n = 0;
                for values in &rows_of_batch {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
                    n += tx.execute(&statement, &refs).await?;
                }
                Ok(n)
            })?;
            progress(table.name, read);
        }
        if row.is_none() {
            return Ok((read, written));
        }
    }
}

/// A PostgreSQL column of `kind` as a SQLite value.
fn from_pg(row: &tokio_postgres::Row, i: usize, kind: Kind) -> Value {
    match kind {
        Kind::Int => row
            .get::<_, Option<i64>>(i)
            .map_or(Value::Null, Value::Integer),
        Kind::Text => row
            .get::<_, Option<String>>(i)
            .map_or(Value::Null, Value::Text),
        Kind::Bytes => row
            .get::<_, Option<Vec<u8>>>(i)
            .map_or(Value::Null, Value::Blob),
    }
}

fn pg_to_sqlite(
    pg: &Pg,
    sqlite: &Store,
    table: &Table,
    cols: &Columns,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<(u64, u64), StoreError> {
    let columns = column_list(cols);
    let params: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
    let insert = format!(
        "INSERT OR IGNORE INTO {} ({columns}) VALUES ({})",
        table.name,
        params.join(", ")
    );
    let select = format!(
        "SELECT {columns} FROM {} ORDER BY {}",
        table.pg_name(),
        key_list(table)
    );
    let (mut read, mut written) = (0u64, 0u64);
    // Keyset pages would need per-table key types; a portal reads the table in order,
    // BATCH rows at a time, within one snapshot.
    pg.transaction(async |tx| {
        let portal = tx.bind(&select, &[]).await?;
        loop {
            let rows = tx.query_portal(&portal, BATCH as i32).await?;
            if rows.is_empty() {
                return Ok(());
            }
            let mut conn = sqlite.conn();
            let sql_tx = conn.transaction()?;
            {
                let mut statement = sql_tx.prepare_cached(&insert)?;
                for row in &rows {
                    let values: Vec<Value> = cols
                        .iter()
                        .enumerate()
                        .map(|(i, (_, kind))| from_pg(row, i, *kind))
                        .collect();
                    written += statement.execute(rusqlite::params_from_iter(values))? as u64;
                }
            }
            sql_tx.commit()?;
            read += rows.len() as u64;
            progress(table.name, read);
        }
    })?;
    Ok((read, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    static DEMO: Schema = Schema {
        name: "demo",
        migrations: &[
            "CREATE TABLE good (id INTEGER PRIMARY KEY, name TEXT, data BLOB);
             CREATE TABLE odd (id INTEGER PRIMARY KEY, price REAL);",
        ],
    };

    #[test]
    fn columns_come_from_the_sqlite_schema_and_odd_kinds_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open_schema(&dir.path().join("demo.db"), Durability::Full, &DEMO).unwrap();
        assert_eq!(
            columns(&store, "good").unwrap(),
            [
                ("id".to_owned(), Kind::Int),
                ("name".to_owned(), Kind::Text),
                ("data".to_owned(), Kind::Bytes)
            ]
        );
        let odd = columns(&store, "odd").unwrap_err().to_string();
        assert!(odd.contains("odd.price") && odd.contains("REAL"), "{odd}");
        let missing = columns(&store, "nothing").unwrap_err().to_string();
        assert!(missing.contains("table nothing is not in"), "{missing}");
    }
}
