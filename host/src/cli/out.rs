//! wrun's own stdout and stderr for the commands: a reader that closed the pipe
//! (`wrun check m.wasm | head -1`) ends the output quietly, never a panic or an error.

use std::io::Write;

/// Standard output, where a closed pipe swallows what follows.
pub(crate) struct Out;

/// Standard error, likewise.
pub(crate) struct ErrOut;

fn quiet(result: std::io::Result<usize>, len: usize) -> std::io::Result<usize> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(len),
        other => other,
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        quiet(std::io::stdout().lock().write(buf), buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        quiet(std::io::stdout().lock().flush().map(|()| 0), 0).map(drop)
    }
}

impl Write for ErrOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        quiet(std::io::stderr().lock().write(buf), buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        quiet(std::io::stderr().lock().flush().map(|()| 0), 0).map(drop)
    }
}

/// `println!` that a closed stdout does not break.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!($crate::cli::out::Out, $($arg)*)
    }};
}

/// `eprintln!` that a closed stderr does not break.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::cli::out::ErrOut, $($arg)*);
    }};
}

pub(crate) use {note, say};
