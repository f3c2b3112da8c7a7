//! Tool families: what a family is in the static catalogue (its name and tool names), what
//! its constructor returns (the tools, holding their services, plus any resources, prompts
//! and instructions it offers), and how a configuration's tool selection is resolved against
//! the catalogue before any family is built.

use std::sync::Arc;

use crate::resources::ResourceProvider;
use crate::tool::Tool;

/// A family as the catalogue knows it: enough to resolve presets and check names without
/// building anything (no database opened, no model loaded).
#[derive(Debug, PartialEq, Eq)]
pub struct FamilyInfo {
    /// The name `tools.add`/`tools.disable` accept for the whole family.
    pub name: &'static str,
    /// One line for `ringfence tools` and the docs.
    pub summary: &'static str,
    /// Its tools, in listing order.
    pub tools: &'static [&'static str],
}

/// A built family: its tools (each holding what it needs) and what it offers besides tools.
pub struct Family {
    info: &'static FamilyInfo,
    tools: Vec<Arc<dyn Tool>>,
    resources: Vec<Arc<dyn ResourceProvider>>,
    instructions: Option<String>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.info.name)
            .field("tools", &self.tools.len())
            .field("resources", &self.resources)
            .finish()
    }
}

impl Family {
    /// A family of `tools`, which must be exactly `info.tools` in that order (checked in
    /// debug builds, and by each family's tests).
    pub fn new(info: &'static FamilyInfo, tools: Vec<Arc<dyn Tool>>) -> Family {
        debug_assert_eq!(
            tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            info.tools,
            "family {} builds other tools than its catalogue entry lists",
            info.name
        );
        debug_assert!(tools.iter().all(|t| t.family() == info.name));
        Family {
            info,
            tools,
            resources: Vec::new(),
            instructions: None,
        }
    }

    /// Also offers MCP resources and prompts.
    pub fn with_resources(mut self, provider: Arc<dyn ResourceProvider>) -> Family {
        self.resources.push(provider);
        self
    }

    /// Adds a paragraph to the instructions a client receives at `initialize`.
    pub fn with_instructions(mut self, text: impl Into<String>) -> Family {
        self.instructions = Some(text.into());
        self
    }

    pub fn info(&self) -> &'static FamilyInfo {
        self.info
    }

    pub fn name(&self) -> &'static str {
        self.info.name
    }

    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    pub fn resources(&self) -> &[Arc<dyn ResourceProvider>] {
        &self.resources
    }

    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }
}

/// A named tool set: clients degrade when offered too many tools, and agents written for one
/// seed expect exactly its names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Preset {
    /// Every tool ringfence has (the default).
    #[default]
    Full,
    /// Seed 000's five tools: read_file, write_file, edit_file, grep, glob.
    Iris,
    /// Seed 002's thirteen file tools.
    LlmChat,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Full, Preset::Iris, Preset::LlmChat];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Full => "full",
            Preset::Iris => "iris",
            Preset::LlmChat => "llm-chat",
        }
    }

    pub fn parse(s: &str) -> Result<Preset, SelectionError> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| SelectionError::UnknownPreset(s.to_owned()))
    }

    /// The tool names of the preset; `None` for the full set.
    pub fn tools(self) -> Option<&'static [&'static str]> {
        match self {
            Preset::Full => None,
            Preset::Iris => Some(&["read_file", "write_file", "edit_file", "grep", "glob"]),
            Preset::LlmChat => Some(&[
                "search_entries",
                "list_directory",
                "read_file",
                "write_file",
                "replace_file_lines",
                "insert_file_content",
                "replace_file_content",
                "entry_info",
                "delete_file",
                "create_folder",
                "move_file",
                "file_access_info",
                "switch_workspace",
            ]),
        }
    }
}

/// Which tools a configuration offers: a preset or an explicit list, then additions and
/// removals (each a tool or a family name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub preset: Preset,
    /// An explicit list instead of the preset.
    pub enable: Option<Vec<String>>,
    pub add: Vec<String>,
    pub disable: Vec<String>,
}

/// A tool selection that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error(
        "unknown preset `{0}`; presets are: full (every tool), iris (seed 000's five file tools), llm-chat (seed 002's thirteen)"
    )]
    UnknownPreset(String),
    #[error(
        "{setting}: unknown tool or family `{name}`; known tools: {known} (families: {families})"
    )]
    UnknownName {
        /// The setting that named it (`tools.enable`, `tools.add`, `tools.disable`).
        setting: &'static str,
        name: String,
        known: String,
        families: String,
    },
    #[error("tools: every tool is disabled; enable at least one")]
    Empty,
}

/// Every family ringfence can build, in listing order: the names presets and settings are
/// checked against, known before any family is built.
#[derive(Debug, Clone)]
pub struct Catalogue {
    families: Vec<&'static FamilyInfo>,
}

impl Catalogue {
    pub fn new(families: impl IntoIterator<Item = &'static FamilyInfo>) -> Catalogue {
        Catalogue {
            families: families.into_iter().collect(),
        }
    }

    pub fn families(&self) -> &[&'static FamilyInfo] {
        &self.families
    }

    /// Every tool name with its family, in listing order.
    pub fn tools(&self) -> impl Iterator<Item = (&'static FamilyInfo, &'static str)> + '_ {
        self.families
            .iter()
            .flat_map(|f| f.tools.iter().map(move |t| (*f, *t)))
    }

    /// The family a tool belongs to.
    pub fn family_of(&self, tool: &str) -> Option<&'static FamilyInfo> {
        self.tools().find(|(_, t)| *t == tool).map(|(f, _)| f)
    }

    fn matches(family: &FamilyInfo, tool: &str, names: &[String]) -> bool {
        names.iter().any(|n| n == tool || n == family.name)
    }

    fn check(&self, setting: &'static str, names: &[String]) -> Result<(), SelectionError> {
        for n in names {
            let known = self
                .families
                .iter()
                .any(|f| f.name == n || f.tools.contains(&n.as_str()));
            if !known {
                return Err(SelectionError::UnknownName {
                    setting,
                    name: n.clone(),
                    known: self.tools().map(|(_, t)| t).collect::<Vec<_>>().join(", "),
                    families: self
                        .families
                        .iter()
                        .map(|f| f.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }

    /// The tool names `selection` offers, in listing order: the preset's own order (or the
    /// catalogue's for `full` and an explicit list), additions after it in catalogue order,
    /// removals taken out. An unknown name is an error naming it and the setting.
    pub fn select(&self, selection: &Selection) -> Result<Vec<&'static str>, SelectionError> {
        let mut names: Vec<&'static str> = match (&selection.enable, selection.preset.tools()) {
            (Some(enable), _) => {
                self.check("tools.enable", enable)?;
                self.tools()
                    .filter(|(f, t)| Self::matches(f, t, enable))
                    .map(|(_, t)| t)
                    .collect()
            }
            (None, None) => self.tools().map(|(_, t)| t).collect(),
            (None, Some(preset)) => preset
                .iter()
                .copied()
                .filter(|t| self.family_of(t).is_some())
                .collect(),
        };
        self.check("tools.add", &selection.add)?;
        for (f, t) in self.tools() {
            if Self::matches(f, t, &selection.add) && !names.contains(&t) {
                names.push(t);
            }
        }
        self.check("tools.disable", &selection.disable)?;
        names.retain(|t| {
            let family = self.family_of(t).expect("selected from the catalogue");
            !Self::matches(family, t, &selection.disable)
        });
        if names.is_empty() {
            return Err(SelectionError::Empty);
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: FamilyInfo = FamilyInfo {
        name: "alpha",
        summary: "",
        tools: &["read_file", "grep", "a_extra"],
    };
    const B: FamilyInfo = FamilyInfo {
        name: "beta",
        summary: "",
        tools: &["b_one", "b_two"],
    };

    fn sel(preset: Preset, enable: Option<&[&str]>, add: &[&str], disable: &[&str]) -> Selection {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Selection {
            preset,
            enable: enable.map(v),
            add: v(add),
            disable: v(disable),
        }
    }

    #[test]
    fn presets_lists_additions_and_removals() {
        let c = Catalogue::new([&A, &B]);
        assert_eq!(
            c.select(&sel(Preset::Full, None, &[], &[])).unwrap(),
            ["read_file", "grep", "a_extra", "b_one", "b_two"]
        );
        // A preset keeps its own order and drops names no family has.
        assert_eq!(
            c.select(&sel(Preset::Iris, None, &["beta"], &["grep"]))
                .unwrap(),
            ["read_file", "b_one", "b_two"]
        );
        assert_eq!(
            c.select(&sel(
                Preset::Full,
                Some(&["b_two", "alpha"]),
                &[],
                &["a_extra"]
            ))
            .unwrap(),
            ["read_file", "grep", "b_two"]
        );
    }

    #[test]
    fn unknown_names_and_empty_selections_are_errors() {
        let c = Catalogue::new([&A, &B]);
        let e = c
            .select(&sel(Preset::Full, None, &["teleport"], &[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("tools.add: unknown tool or family `teleport`"),
            "{e}"
        );
        assert!(e.contains("(families: alpha, beta)"), "{e}");
        assert_eq!(
            c.select(&sel(Preset::Full, None, &[], &["alpha", "beta"])),
            Err(SelectionError::Empty)
        );
        assert!(matches!(
            Preset::parse("everything"),
            Err(SelectionError::UnknownPreset(_))
        ));
    }
}
