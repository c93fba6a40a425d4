//! Baton's own log lines: one event, one line. Text from outside (a model name a client sent,
//! an upstream's error) may hold newlines or terminal escapes that would forge log lines or
//! repaint a terminal: every control character inside an event is written escaped (`\n`,
//! `\x1b`), so only the event's own end of line ends a line.

use std::io::{self, Write};

/// A writer that escapes control characters inside each event it is given (one write per
/// event, as `tracing-subscriber`'s formatter writes).
pub struct OneLine<W>(pub W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        let mut out = Vec::with_capacity(buf.len() + 8);
        for &b in body {
            match b {
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.push(b),
                b if b < 0x20 || b == 0x7f => {
                    let _ = write!(out, "\\x{b:02x}");
                }
                b => out.push(b),
            }
        }
        if body.len() < buf.len() {
            out.push(b'\n');
        }
        self.0.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Standard error, one line per event (for `tracing_subscriber::fmt().with_writer`; use it with
/// `with_ansi(false)`, as its own colour codes would be escaped too).
pub fn stderr() -> OneLine<io::Stderr> {
    OneLine(io::stderr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_inside_an_event_cannot_start_a_line() {
        let mut w = OneLine(Vec::new());
        w.write_all(b"INFO model=\"x\nERROR forged\x1b[2J\"\n")
            .expect("write");
        assert_eq!(
            String::from_utf8(w.0).expect("utf8"),
            "INFO model=\"x\\nERROR forged\\x1b[2J\"\n"
        );
    }
}
