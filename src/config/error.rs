//! A configuration problem, located as precisely as possible (a leaf).

use std::path::{Path, PathBuf};

/// A configuration problem, located as precisely as possible.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: line {line}, column {column}: not valid JSON: {message}")]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {path}: {message}")]
    Field {
        file: PathBuf,
        path: String,
        message: String,
    },
}

impl ConfigError {
    pub fn field(file: &Path, path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Field {
            file: file.to_path_buf(),
            path: path.into(),
            message: message.into(),
        }
    }
}
