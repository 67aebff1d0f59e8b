//! WASI stdout/stderr backed by a [`Capture`]: every write is accepted whole and the stream is
//! always ready, so a guest can never block on, or be failed by, a full cap.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::capture::Capture;

/// Largest write the guest is told it may make at once. Any size works; this keeps each
/// host-side copy small.
const WRITE_BUDGET: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct CaptureStream(pub(crate) Capture);

impl IsTerminal for CaptureStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CaptureStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CaptureStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.0.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CaptureStream {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CaptureStream {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.0.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A reader of a stream stdin ([`crate::Stdin::Stream`]) for a wasm guest: a regular file is read
/// as a file; a pipe or terminal is opened afresh (its own open file description, so that
/// making it non-blocking changes nothing for the process that handed it over) and read as the
/// reactor says it is ready. Must be called inside the runtime that will poll it.
pub(crate) fn stream_reader(
    fd: &std::os::fd::OwnedFd,
) -> std::io::Result<Box<dyn tokio::io::AsyncRead + Send + Sync + Unpin>> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::{Mode, SFlag};
    use std::os::fd::AsRawFd;
    let kind = nix::sys::stat::fstat(fd).map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)?;
    if kind == SFlag::S_IFREG {
        let file = std::fs::File::from(fd.try_clone()?);
        return Ok(Box::new(tokio::fs::File::from_std(file)));
    }
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let own = match nix::fcntl::open(path.as_str(), flags, Mode::empty()) {
        Ok(own) => own,
        // A socket cannot be opened again: its descriptor is made non-blocking as it is.
        Err(_) => {
            let dup = fd.try_clone()?;
            let current = nix::fcntl::fcntl(&dup, nix::fcntl::FcntlArg::F_GETFL)?;
            let nonblocking = OFlag::from_bits_truncate(current) | OFlag::O_NONBLOCK;
            nix::fcntl::fcntl(&dup, nix::fcntl::FcntlArg::F_SETFL(nonblocking))?;
            dup
        }
    };
    Ok(Box::new(FdReader(crate::sys::watch_fd(own)?)))
}

/// Non-blocking reads of a descriptor registered with the reactor.
struct FdReader(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>);

impl tokio::io::AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            let mut guard = match self.0.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => guard,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let unfilled = buf.initialize_unfilled();
            match guard
                .try_io(|inner| nix::unistd::read(inner.get_ref(), unfilled).map_err(std::io::Error::from))
            {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}
