//! Command-line features of the `baton` binary that talk to a running Baton.

pub mod commands;
pub mod connect;
pub mod keys;
pub mod probe;
pub mod replay;
pub mod service;
pub mod status;
pub mod table;

/// A command's output on stdout. When the reader has gone (`baton status | head -1`), the
/// command ends there, quietly and successfully, as the shell's own tools do; any other write
/// error is said on stderr.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(2);
    }
}
