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
    /// The named tool sets its tools belong to (a seed's set, say), each with those of its
    /// tools in the order the set lists them. A preset several families name holds each
    /// one's tools, in catalogue order.
    pub presets: &'static [PresetPart],
}

/// In a [`PresetPart`]: every tool of the family, whatever it has.
pub const EVERY_TOOL: &[&str] = &["*"];

/// The preset for a person's assistant: every tool, less those that do what another does
/// (the llm-chat file tools beside the Iris ones). A family with nothing to drop declares
/// its part as [`EVERY_TOOL`].
pub const ASSISTANT: &str = "assistant";

/// What the assistant preset is, for messages.
pub const ASSISTANT_SUMMARY: &str = "every feature, less the file tools that do what another does";

/// A family's part of a named tool set.
#[derive(Debug, PartialEq, Eq)]
pub struct PresetPart {
    /// The preset's name (`tools.preset = "iris"`).
    pub name: &'static str,
    /// What the preset is, for messages (`seed 000's five file tools`).
    pub summary: &'static str,
    pub tools: &'static [&'static str],
}

/// A built family: its tools (each holding what it needs) and what it offers besides tools.
pub struct Family {
    info: &'static FamilyInfo,
    tools: Vec<Arc<dyn Tool>>,
    resources: Vec<Arc<dyn ResourceProvider>>,
    instructions: Option<String>,
    sections: Vec<Arc<dyn crate::page::Section>>,
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
            sections: Vec::new(),
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

    /// Adds the family's section of the settings page (what it keeps for a person, shown
    /// to them and changed by them).
    pub fn with_section(mut self, section: Arc<dyn crate::page::Section>) -> Family {
        self.sections.push(section);
        self
    }

    pub fn info(&self) -> &'static FamilyInfo {
        self.info
    }

    pub fn sections(&self) -> &[Arc<dyn crate::page::Section>] {
        &self.sections
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

/// Which tools a configuration offers: a preset or an explicit list, then additions and
/// removals (each a tool or a family name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// A named tool set a family declares (`None`: every tool, the preset `full`).
    pub preset: Option<String>,
    /// An explicit list instead of the preset.
    pub enable: Option<Vec<String>>,
    pub add: Vec<String>,
    pub disable: Vec<String>,
}

/// A tool selection that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("unknown preset `{name}`; presets are: full (every tool), {known}")]
    UnknownPreset { name: String, known: String },
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

/// The preset of every tool.
pub const FULL: &str = "full";

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

    /// The presets the families declare (besides `full`), each once, with its summary.
    pub fn presets(&self) -> Vec<(&'static str, &'static str)> {
        let mut seen: Vec<(&'static str, &'static str)> = Vec::new();
        for part in self.families.iter().flat_map(|f| f.presets) {
            if !seen.iter().any(|(n, _)| *n == part.name) {
                seen.push((part.name, part.summary));
            }
        }
        seen
    }

    /// The tools of the preset `name` (`None` for `full`: every tool), or why there is none.
    pub fn preset(&self, name: &str) -> Result<Option<Vec<&'static str>>, SelectionError> {
        if name == FULL {
            return Ok(None);
        }
        // A family's part holds its own tools only: a name it does not have is left out.
        let tools: Vec<&'static str> = self
            .families
            .iter()
            .flat_map(|f| {
                f.presets
                    .iter()
                    .filter(|p| p.name == name)
                    .flat_map(|p| {
                        if p.tools == EVERY_TOOL {
                            f.tools
                        } else {
                            p.tools
                        }
                    })
                    .copied()
                    .filter(|t| f.tools.contains(t))
            })
            .collect();
        if tools.is_empty() {
            return Err(SelectionError::UnknownPreset {
                name: name.to_owned(),
                known: self
                    .presets()
                    .iter()
                    .map(|(n, summary)| format!("{n} ({summary})"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(Some(tools))
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
        let preset = match &selection.preset {
            Some(name) => self.preset(name)?,
            None => None,
        };
        let mut names: Vec<&'static str> = match (&selection.enable, preset) {
            (Some(enable), _) => {
                self.check("tools.enable", enable)?;
                self.tools()
                    .filter(|(f, t)| Self::matches(f, t, enable))
                    .map(|(_, t)| t)
                    .collect()
            }
            (None, None) => self.tools().map(|(_, t)| t).collect(),
            (None, Some(preset)) => preset,
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
        presets: &[PresetPart {
            name: "small",
            summary: "a few",
            tools: &["grep", "read_file"],
        }],
    };
    const B: FamilyInfo = FamilyInfo {
        name: "beta",
        summary: "",
        tools: &["b_one", "b_two"],
        presets: &[PresetPart {
            name: "small",
            summary: "a few",
            // Another family's tool in a part is left out, never selected through it.
            tools: &["b_two", "grep"],
        }],
    };

    fn sel(preset: &str, enable: Option<&[&str]>, add: &[&str], disable: &[&str]) -> Selection {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Selection {
            preset: (preset != FULL).then(|| preset.to_owned()),
            enable: enable.map(v),
            add: v(add),
            disable: v(disable),
        }
    }

    #[test]
    fn presets_lists_additions_and_removals() {
        let c = Catalogue::new([&A, &B]);
        assert_eq!(
            c.select(&sel(FULL, None, &[], &[])).unwrap(),
            ["read_file", "grep", "a_extra", "b_one", "b_two"]
        );
        // A preset holds each family's part in its own order, families in catalogue order.
        assert_eq!(
            c.select(&sel("small", None, &[], &[])).unwrap(),
            ["grep", "read_file", "b_two"]
        );
        assert_eq!(
            c.select(&sel("small", None, &["beta"], &["grep"])).unwrap(),
            ["read_file", "b_two", "b_one"]
        );
        assert_eq!(
            c.select(&sel(FULL, Some(&["b_two", "alpha"]), &[], &["a_extra"]))
                .unwrap(),
            ["read_file", "grep", "b_two"]
        );
    }

    #[test]
    fn unknown_names_and_empty_selections_are_errors() {
        let c = Catalogue::new([&A, &B]);
        let e = c
            .select(&sel(FULL, None, &["teleport"], &[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("tools.add: unknown tool or family `teleport`"),
            "{e}"
        );
        assert!(e.contains("(families: alpha, beta)"), "{e}");
        assert_eq!(
            c.select(&sel(FULL, None, &[], &["alpha", "beta"])),
            Err(SelectionError::Empty)
        );
        let e = c.preset("everything").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown preset `everything`; presets are: full (every tool), small (a few)"
        );
    }
}
