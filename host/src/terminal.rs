//! Standard error as a person sees it: log lines, and below them one live status line (the progress of
//! `run`), redrawn after every log line so that neither overwrites the other (ADR 0019).
//!
//! Everything written to stderr while a status line may be shown goes through here: the log writer
//! ([`LogWriter`], what `tracing` writes to) and [`set_status`] / [`clear_status`]. A log line erases the
//! status line (`\r` + erase line), is written whole, and the status line is drawn again below it. When
//! stderr is not a terminal there is never a status line and log lines are written as they are (no
//! carriage returns, no escape sequences). While the SQL shell reads a line, log lines go to its line
//! editor instead ([`set_printer`]), which prints them above the prompt and redraws the prompt.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Erase the current line and return to its start.
const ERASE_LINE: &[u8] = b"\r\x1b[2K";

/// Where log lines go instead of stderr (the SQL shell's line editor).
pub type Printer = Box<dyn FnMut(String) + Send>;

/// What is on the screen: the status line shown (if any) and a printer that took over log lines.
struct Screen {
    status: Option<String>,
    printer: Option<Printer>,
}

static SCREEN: Mutex<Screen> = Mutex::new(Screen {
    status: None,
    printer: None,
});

fn screen() -> MutexGuard<'static, Screen> {
    SCREEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether stderr is a terminal (checked once).
pub fn is_terminal() -> bool {
    static TTY: OnceLock<bool> = OnceLock::new();
    *TTY.get_or_init(|| std::io::stderr().is_terminal())
}

/// The terminal's width in columns (80 when unknown).
pub fn columns() -> usize {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct it is given, which lives across the call;
    // fd 2 is stderr, and the call fails harmlessly when it is not a terminal.
    let ok = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    }
}

/// The status line cut to the terminal's width (a wrapped line could not be erased with one `\r`).
fn fit(line: &str, width: usize) -> &str {
    let max = width.saturating_sub(1).max(1);
    match line.char_indices().nth(max) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

/// Shows `line` as the status line (replacing the previous one). Nothing when stderr is not a terminal.
pub fn set_status(line: &str) {
    if !is_terminal() {
        return;
    }
    let mut s = screen();
    let line = fit(line, columns()).to_string();
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(ERASE_LINE);
    let _ = e.write_all(line.as_bytes());
    let _ = e.flush();
    s.status = Some(line);
}

/// Removes the status line from the screen.
pub fn clear_status() {
    let mut s = screen();
    if s.status.take().is_some() {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(ERASE_LINE);
        let _ = e.flush();
    }
}

/// Sends log lines to `printer` (the shell's line editor) until [`take_printer`].
pub fn set_printer(printer: Printer) {
    screen().printer = Some(printer);
}

/// Log lines go to stderr again.
pub fn take_printer() -> Option<Printer> {
    screen().printer.take()
}

/// Writes one complete log line (or several) to the screen.
fn write_log(bytes: &[u8]) {
    let mut s = screen();
    if let Some(p) = s.printer.as_mut() {
        p(String::from_utf8_lossy(bytes)
            .trim_end_matches('\n')
            .to_string());
        return;
    }
    let mut e = std::io::stderr().lock();
    match &s.status {
        Some(status) => {
            let _ = e.write_all(ERASE_LINE);
            let _ = e.write_all(bytes);
            if !bytes.ends_with(b"\n") {
                let _ = e.write_all(b"\n");
            }
            let _ = e.write_all(status.as_bytes());
        }
        None => {
            let _ = e.write_all(bytes);
        }
    }
    let _ = e.flush();
}

/// Writes program output (the `print` connector's rows) to stdout or stderr. When a status line is shown
/// and the output goes to the same screen, it is erased first and drawn again after the output.
pub fn write_output(bytes: &[u8], to_stderr: bool) -> std::io::Result<()> {
    let s = screen();
    let status = s
        .status
        .as_ref()
        .filter(|_| to_stderr || std::io::stdout().is_terminal());
    if let Some(status) = status {
        let mut e = std::io::stderr().lock();
        e.write_all(ERASE_LINE)?;
        e.flush()?;
        if to_stderr {
            e.write_all(bytes)?;
        } else {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes)?;
            o.flush()?;
        }
        e.write_all(status.as_bytes())?;
        return e.flush();
    }
    drop(s);
    if to_stderr {
        let mut e = std::io::stderr().lock();
        e.write_all(bytes)?;
        e.flush()
    } else {
        let mut o = std::io::stdout().lock();
        o.write_all(bytes)?;
        o.flush()
    }
}

/// The `tracing` writer: one buffer per event, written whole to the screen when the event is formatted.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

/// One event's text.
#[derive(Debug, Default)]
pub struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            write_log(&self.0);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;
    fn make_writer(&'a self) -> LogLine {
        LogLine::default()
    }
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn the_status_line_fits_the_terminal() {
        assert_eq!(fit("abcdef", 80), "abcdef");
        assert_eq!(fit("abcdef", 4), "abc");
        assert_eq!(fit("ab€def", 4), "ab€");
        assert_eq!(fit("abc", 0), "a");
    }
}
