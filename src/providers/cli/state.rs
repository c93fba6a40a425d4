//! A CLI's state as last checked (a leaf): what a provider's runtime holds between checks.

use std::path::PathBuf;

use serde::Serialize;

/// A CLI's state as last checked.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CliStatus {
    /// The resolved executable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<PathBuf>,
    /// First line of `--version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `None` when the CLI gave no clear answer (it is then tried).
    pub logged_in: Option<bool>,
    /// Why the provider cannot be used (missing, refused, logged out), with what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub checked_at_ms: i64,
    /// The login's usage windows, where the CLI tells them without a request (Codex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<crate::limits::windows::Window>,
}
