//! Command-line features of the `baton` binary that talk to a running Baton.

pub mod status;
