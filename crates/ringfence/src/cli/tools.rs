//! `tools`: the offered tools' definitions, in the MCP, OpenAI or Anthropic shape.

use std::process::ExitCode;

use std::io::Write;

use clap::ValueEnum;

use ringfence_core::DefinitionFormat;

use super::print_out;
use crate::app::App;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Format {
    Mcp,
    Openai,
    Anthropic,
}

pub(super) fn run(app: &App, format: Format, names: bool) -> ExitCode {
    if names {
        // The set a client sees, one name a line, and what all of it costs a conversation.
        let listed: Vec<&str> = app.toolbox.iter().map(|t| t.name()).collect();
        print_out(&listed.join("\n"));
        let bytes = serde_json::to_string(&serde_json::json!({
            "tools": app.toolbox.definitions(DefinitionFormat::Mcp)
        }))
        .map_or(0, |s| s.len());
        let _ = writeln!(
            std::io::stderr(),
            "{} tools; tools/list is {} bytes (about {} tokens at 4 bytes a token)",
            listed.len(),
            bytes,
            bytes / 4
        );
        return ExitCode::SUCCESS;
    }
    let f = match format {
        Format::Mcp => DefinitionFormat::Mcp,
        Format::Openai => DefinitionFormat::OpenAi,
        Format::Anthropic => DefinitionFormat::Anthropic,
    };
    let defs = app.toolbox.definitions(f);
    print_out(&serde_json::to_string_pretty(&defs).unwrap_or_default());
    // Beside the definitions (stdout stays pure JSON): what is off and how to turn it on.
    for (family, why) in &app.withheld {
        let _ = writeln!(
            std::io::stderr(),
            "note: the {family} tools are not offered: {why}"
        );
    }
    ExitCode::SUCCESS
}
