//! Option errors: which table, which option, what is wrong.

use crate::sql::Pos;

/// An option error. Rendered `<pos>: table '<t>', option '<o>': <message>` when the option layer finds it
/// (the declarations, their rules), and `option '<o>': <message>` when a connector finds it while
/// decoding a table's options (the catalog then prefixes the table's position and name, as for every
/// error of a connector's table checks).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct OptionError {
    pub table: String,
    pub option: String,
    pub pos: Option<Pos>,
    pub message: String,
    pub found_by: FoundBy,
}

/// Who found an [`OptionError`] (it decides how the error is rendered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundBy {
    /// The option layer: declarations and rules.
    Declarations,
    /// A connector decoding the table's options into its typed configuration.
    Connector,
}

impl OptionError {
    pub fn new(
        table: impl Into<String>,
        option: impl Into<String>,
        pos: Option<Pos>,
        message: impl Into<String>,
    ) -> Self {
        OptionError {
            table: table.into(),
            option: option.into(),
            pos,
            message: message.into(),
            found_by: FoundBy::Declarations,
        }
    }

    /// An error a connector finds while decoding `table`'s options.
    pub fn decoding(
        table: impl Into<String>,
        option: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        OptionError {
            found_by: FoundBy::Connector,
            ..Self::new(table, option, None, message)
        }
    }

    fn render(&self) -> String {
        match self.found_by {
            FoundBy::Declarations => {
                let pos = self.pos.map(|p| format!("{p}: ")).unwrap_or_default();
                format!(
                    "{pos}table '{}', option '{}': {}",
                    self.table, self.option, self.message
                )
            }
            FoundBy::Connector => format!("option '{}': {}", self.option, self.message),
        }
    }
}
