//! Output capture shared by every backend.
//!
//! A [`Capture`] keeps the first half of its cap and the last half, counts every byte written
//! and never fails, blocks or short-writes its writer: once the cap is full it keeps draining
//! into the tail ring, so a flooding helper neither deadlocks on a full pipe nor sees an error
//! it could react to. (wasmtime-wasi's `MemoryOutputPipe` traps on overflow, and the seed 003
//! review found a short write in the same spot; this type has neither.) Memory held is bounded
//! by the cap, whatever is written.
//!
//! [`Capture::finish`] renders the stream: head, one marker line with the number of bytes cut,
//! tail.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::limits::ByteSize;

/// A capped, head-and-tail capture of one output stream. Clones share the same buffer.
#[derive(Debug, Clone)]
pub struct Capture {
    inner: Arc<Mutex<Ring>>,
}

#[derive(Debug)]
struct Ring {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    /// A capture that keeps at most `cap` bytes: the first `cap / 2` and the last `cap - cap / 2`.
    /// The cap has been validated by [`Limits::validate`](crate::Limits::validate); a zero cap
    /// here keeps nothing but still counts.
    pub fn new(cap: ByteSize) -> Self {
        let cap = cap.as_usize();
        let head_cap = cap / 2;
        Self {
            inner: Arc::new(Mutex::new(Ring {
                head_cap,
                tail_cap: cap - head_cap,
                head: Vec::new(),
                tail: VecDeque::new(),
                total: 0,
            })),
        }
    }

    /// Appends `bytes`. Never fails and never keeps more than the cap.
    pub fn push(&self, bytes: &[u8]) {
        let mut ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        ring.total = ring.total.saturating_add(bytes.len() as u64);
        let room = ring.head_cap - ring.head.len();
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        ring.head.extend_from_slice(to_head);
        if rest.is_empty() {
            return;
        }
        let tail_cap = ring.tail_cap;
        if rest.len() >= tail_cap {
            ring.tail.clear();
            ring.tail.extend(&rest[rest.len() - tail_cap..]);
        } else {
            let overflow = (ring.tail.len() + rest.len()).saturating_sub(tail_cap);
            ring.tail.drain(..overflow);
            ring.tail.extend(rest);
        }
    }

    /// Bytes written so far, kept or not.
    pub fn total_bytes(&self) -> u64 {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).total
    }

    /// Renders what was kept: head, a marker line if anything was cut, tail.
    pub fn finish(&self) -> Captured {
        let ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = (ring.head.len() + ring.tail.len()) as u64;
        let cut = ring.total - kept;
        let mut rendered = Vec::with_capacity(ring.head.len() + ring.tail.len() + 64);
        rendered.extend_from_slice(&ring.head);
        if cut > 0 {
            rendered.extend_from_slice(marker_line(&ring.head, cut).as_bytes());
        }
        let (a, b) = ring.tail.as_slices();
        rendered.extend_from_slice(a);
        rendered.extend_from_slice(b);
        Captured {
            rendered,
            total_bytes: ring.total,
            cut_bytes: cut,
        }
    }
}

/// The marker put between head and tail. It starts on a line of its own.
fn marker_line(head: &[u8], cut: u64) -> String {
    let mut line = String::new();
    if !head.is_empty() && !head.ends_with(b"\n") {
        line.push('\n');
    }
    let _ = writeln!(line, "{}", truncation_marker(cut));
    line
}

/// The text of the marker line for `cut` bytes removed from the middle of a stream.
pub fn truncation_marker(cut: u64) -> String {
    format!("[wrun: {cut} bytes cut from the middle of this stream]")
}

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A captured stream as rendered at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// Head, marker line (if cut), tail. Serialized as text (invalid UTF-8 replaced).
    #[serde(rename = "text", with = "lossy_text")]
    pub rendered: Vec<u8>,
    /// Every byte the helper wrote to the stream.
    pub total_bytes: u64,
    /// Bytes removed from the middle (0 when nothing was cut).
    pub cut_bytes: u64,
}

impl Captured {
    /// An empty stream.
    pub fn empty() -> Self {
        Self {
            rendered: Vec::new(),
            total_bytes: 0,
            cut_bytes: 0,
        }
    }

    /// Whether bytes were cut.
    pub fn truncated(&self) -> bool {
        self.cut_bytes > 0
    }

    /// The rendered stream as text, invalid UTF-8 replaced.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.rendered)
    }
}

mod lossy_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        String::deserialize(d).map(String::into_bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn under_the_cap_everything_is_kept() {
        let c = Capture::new(ByteSize(16));
        c.push(b"hello ");
        c.push(b"world");
        let out = c.finish();
        assert_eq!(out.rendered, b"hello world");
        assert_eq!(out.total_bytes, 11);
        assert!(!out.truncated());
    }

    #[test]
    fn head_and_tail_are_kept_and_the_middle_is_counted() {
        let c = Capture::new(ByteSize(10));
        for chunk in [&b"01234"[..], b"56789abcdef", b"ghij", b"KLMNO"] {
            c.push(chunk);
        }
        let out = c.finish();
        assert_eq!(out.total_bytes, 25);
        assert_eq!(out.cut_bytes, 15);
        let text = out.text();
        assert!(text.starts_with("01234\n[wrun: 15 bytes cut"), "{text}");
        assert!(text.ends_with("]\nKLMNO"), "{text}");
    }

    #[test]
    fn a_single_huge_write_is_accepted_whole() {
        let mut c = Capture::new(ByteSize(8));
        let big = vec![b'x'; 1 << 20];
        assert_eq!(c.write(&big).expect("never fails"), big.len());
        let out = c.finish();
        assert_eq!(out.total_bytes, 1 << 20);
        assert_eq!(out.cut_bytes, (1 << 20) - 8);
    }

    #[test]
    fn marker_is_on_its_own_line_after_a_newline() {
        let c = Capture::new(ByteSize(4));
        c.push(b"a\nbcdefg");
        assert!(c.finish().text().starts_with("a\n[wrun: 4 bytes cut"));
    }

    #[test]
    fn many_small_writes_keep_exactly_the_last_bytes() {
        let c = Capture::new(ByteSize(6));
        for i in 0..1000u32 {
            c.push(format!("{}", i % 10).as_bytes());
        }
        let out = c.finish();
        assert!(out.rendered.starts_with(b"012"));
        assert!(out.rendered.ends_with(b"789"), "{}", out.text());
        assert_eq!(out.cut_bytes, 994);
    }
}
