//! Command-line features of the `baton` binary that talk to a running Baton.

pub mod commands;
pub mod connect;
pub mod keys;
pub mod probe;
pub mod service;
pub mod status;
pub mod table;
