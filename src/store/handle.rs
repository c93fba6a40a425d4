//! The database's handle and what can go wrong with it (a leaf): each store file implements
//! its part of `Store` and takes these from here.

use std::path::PathBuf;

use super::writer::StoreWriter;

pub(crate) const DB_FILE: &str = "baton.db";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {path} was written by a newer Baton (schema {found}, this build knows {known}); upgrade Baton or use another --data-dir")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("cannot create data directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("stored provider `{id}` is unreadable: {message}")]
    Corrupt { id: String, message: String },
}

/// Handle to the database: a path for readers plus the background writer.
#[derive(Clone)]
pub struct Store {
    pub(super) path: PathBuf,
    pub(super) writer: StoreWriter,
}
