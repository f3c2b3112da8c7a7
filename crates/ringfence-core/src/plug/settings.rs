//! Family sections: the tables of the configuration file that belong to a family (`[memory]`,
//! and each new family's own). The binary's configuration does not know their shape; each
//! family's plug reads its table through a [`SectionInput`] and resolves it (file, then its
//! `RINGFENCE_*` variables) into its own settings type, kept in [`FamilySettings`]. Every
//! family's section is resolved when the configuration loads, offered or not, so a mistake in
//! any of them stops the start (fail closed); a [`SettingsError`] names the key at fault.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::time::{self, TimeZone};

/// Why a family's settings were refused. Each names the file, key or variable at fault.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file's table holds a key or a value its schema does not take.
    #[error("config file {}: {}", path.display(), super::words::toml_error(source))]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    /// A path that must be absolute is not.
    #[error("{key}: `{}` must be an absolute path", path.display())]
    NotAbsolute { key: String, path: PathBuf },
    /// A value is refused: `key` names where it came from, `reason` what is wrong.
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
}

impl SettingsError {
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> SettingsError {
        SettingsError::Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub fn not_absolute(key: impl Into<String>, path: impl Into<PathBuf>) -> SettingsError {
        SettingsError::NotAbsolute {
            key: key.into(),
            path: path.into(),
        }
    }
}

/// An IANA time zone named by the setting `key`.
pub fn zone_setting(key: &str, name: &str) -> Result<TimeZone, SettingsError> {
    time::zone(name).map_err(|e| SettingsError::invalid(key, e.to_string()))
}

/// Where environment values come from (a map in tests, the process environment otherwise).
pub trait Env {
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
}

impl Env for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<String> {
        BTreeMap::get(self, key).cloned()
    }
}

/// The configuration file as read: its text, for the family sections to parse.
#[derive(Debug)]
pub struct FileText {
    pub path: PathBuf,
    pub text: String,
}

/// What a family's plug resolves its settings from.
pub struct SectionInput<'a> {
    /// The file, if one was read.
    pub file: Option<&'a FileText>,
    /// The environment (`RINGFENCE_*` variables).
    pub env: &'a dyn Env,
    /// The resolved data directory (for defaults such as database files).
    pub data_dir: &'a Path,
}

impl SectionInput<'_> {
    /// A true/false variable (`true`, `1`, `yes` / `false`, `0`, `no`); `None` when unset or
    /// empty, an error naming the variable otherwise.
    pub fn flag(&self, var: &str) -> Result<Option<bool>, SettingsError> {
        let Some(v) = self.env.get(var).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        match v.trim() {
            "true" | "1" | "yes" => Ok(Some(true)),
            "false" | "0" | "no" => Ok(Some(false)),
            other => Err(SettingsError::invalid(
                var,
                format!("`{other}` is not true or false"),
            )),
        }
    }

    /// The first of `vars` that is set, as [`SectionInput::flag`] reads it: ringfence's own
    /// variable first, then a seed's alias for it.
    pub fn first_flag(&self, vars: &[&str]) -> Result<Option<bool>, SettingsError> {
        for var in vars {
            if let Some(v) = self.flag(var)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// The table `[name]` of the file, or `T::default()` when the file has none. Parsed from
    /// the file's text, so an error names its line and column like every other key's.
    pub fn table<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T, SettingsError> {
        let Some(file) = self.file else {
            return Ok(T::default());
        };
        let parse = |text: &str| {
            let de = toml::de::Deserializer::parse(text)?;
            OneTable::<T> {
                name,
                found: PhantomData,
            }
            .deserialize(de)
        };
        parse(&file.text)
            .map(Option::unwrap_or_default)
            .map_err(|source| SettingsError::Parse {
                path: file.path.clone(),
                source,
            })
    }
}

/// Deserializes only the top-level key `name` of a document, skipping every other.
struct OneTable<'n, T> {
    name: &'n str,
    found: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for OneTable<'_, T> {
    type Value = Option<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Option<T>, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for OneTable<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.name {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A family's settings in effect, as `ringfence config show` prints them: each key as the
/// file names it (relative to the family's table) with its value as TOML writes it. A secret
/// shows only whether it is set.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Shown(pub Vec<(String, String)>);

impl Shown {
    /// A value TOML can write (text, a whole number, a flag, a list of texts).
    pub fn value(mut self, key: &str, value: impl Into<toml::Value>) -> Shown {
        self.0.push((key.to_owned(), value.into().to_string()));
        self
    }

    /// A whole number (TOML's integers are signed 64-bit; a larger one is written as text).
    pub fn number(self, key: &str, n: u64) -> Shown {
        match i64::try_from(n) {
            Ok(n) => self.value(key, n),
            Err(_) => self.raw(key, n.to_string()),
        }
    }

    /// A number of megabytes (`bytes` / `unit`), written as a whole number when it is one.
    pub fn megabytes(self, key: &str, bytes: u64, unit: u64) -> Shown {
        if bytes.is_multiple_of(unit) {
            self.number(key, bytes / unit)
        } else {
            self.value(key, bytes as f64 / unit as f64)
        }
    }

    /// A secret: `(set)` or `(unset)`, never its value.
    pub fn secret(self, key: &str, set: bool) -> Shown {
        self.raw(key, if set { "(set)" } else { "(unset)" }.to_owned())
    }

    /// A value already in words (`(none)`, a count of tables).
    pub fn raw(mut self, key: &str, text: String) -> Shown {
        self.0.push((key.to_owned(), text));
        self
    }
}

/// Every family's resolved settings, by family name.
#[derive(Clone, Default)]
pub struct FamilySettings(BTreeMap<&'static str, Arc<dyn Any + Send + Sync>>);

impl FamilySettings {
    pub fn insert(&mut self, family: &'static str, settings: Arc<dyn Any + Send + Sync>) {
        self.0.insert(family, settings);
    }

    /// The settings `family`'s plug resolved. Every plug's are resolved when the
    /// configuration loads; asking for another family or another type is a programming
    /// error.
    pub fn get<T: Any>(&self, family: &str) -> &T {
        self.0
            .get(family)
            .and_then(|s| s.downcast_ref::<T>())
            .unwrap_or_else(|| {
                panic!(
                    "no settings of type {} for the family `{family}`",
                    std::any::type_name::<T>()
                )
            })
    }
}

impl fmt::Debug for FamilySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Demo {
        size: Option<u32>,
    }

    fn input<'a>(file: Option<&'a FileText>, env: &'a dyn Env) -> SectionInput<'a> {
        SectionInput {
            file,
            env,
            data_dir: Path::new("/data"),
        }
    }

    fn file(text: &str) -> FileText {
        FileText {
            path: "/etc/ringfence.toml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_table_is_read_and_the_rest_skipped() {
        let env = BTreeMap::new();
        let f = file("log = \"debug\"\n[other]\nx = [1, 2]\n[demo]\nsize = 3\n");
        let demo: Demo = input(Some(&f), &env).table("demo").unwrap();
        assert_eq!(demo.size, Some(3));
    }

    #[test]
    fn a_missing_table_or_file_gives_the_defaults() {
        let env = BTreeMap::new();
        let f = file("log = \"debug\"\n");
        assert_eq!(
            input(Some(&f), &env).table::<Demo>("demo").unwrap(),
            Demo::default()
        );
        assert_eq!(
            input(None, &env).table::<Demo>("demo").unwrap(),
            Demo::default()
        );
    }

    #[test]
    fn an_error_names_the_file_the_key_and_the_line() {
        let env = BTreeMap::new();
        let f = file("log = \"debug\"\n\n[demo]\nsize = 3\nsise = 4\n");
        let err = input(Some(&f), &env)
            .table::<Demo>("demo")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/etc/ringfence.toml"), "{err}");
        assert!(err.contains("sise"), "{err}");
        assert!(err.contains("line 5"), "{err}");
        let f = file("[demo]\nsize = \"big\"\n");
        let err = input(Some(&f), &env)
            .table::<Demo>("demo")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn settings_are_found_by_family_and_type() {
        let mut s = FamilySettings::default();
        s.insert("demo", Arc::new(7u32));
        assert_eq!(*s.get::<u32>("demo"), 7);
        assert_eq!(format!("{s:?}"), "{\"demo\"}");
        let wrong =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *s.get::<u64>("demo")));
        assert!(wrong.is_err());
    }
}
