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
//!
//! A stdout capture also reads the stream's **records** as they are written
//! ([`Capture::with_records`]): each line that is a JSON object naming a `wrun_…` key (a
//! finding, a rule or the tool, as the wrun-guest protocol writes them) is kept whole and
//! parsed, up to a count and a byte budget, whatever the text cap cuts; a record past either is
//! counted as dropped, never kept in part ([`Records`]).

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
    records: Option<Scan>,
}

/// The records of a stream: whole lines that are JSON objects of the wrun-guest protocol
/// (findings, rules, the tool), read as the helper wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Records {
    /// The records kept, in the order written, each with its 1-based line in the stream.
    pub kept: Vec<Record>,
    /// Lines that looked like records (a `{` line naming a `wrun_` key) but are not JSON
    /// objects: their line and the parser's reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub malformed: Vec<(u64, String)>,
    /// Records past the count or byte budget: counted, not kept.
    pub dropped: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// Other non-blank lines (text, JSON that names no `wrun_` key): counted.
    pub other_lines: u64,
}

impl Records {
    /// Whether the stream held no record and nothing was dropped.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.malformed.is_empty() && self.dropped == 0
    }
}

/// One record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Its 1-based line in the stream.
    pub line: u64,
    /// The object as written.
    pub value: serde_json::Map<String, serde_json::Value>,
}

/// How many records, and how many bytes of them, a capture keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    /// Records kept (malformed ones count too).
    pub count: u32,
    /// Bytes of records kept.
    pub bytes: ByteSize,
}

/// The record scanner: the current line (up to what could still be kept, or a prefix long
/// enough to tell what it is), and what was found.
#[derive(Debug)]
struct Scan {
    limits: RecordLimits,
    line: Vec<u8>,
    /// Bytes of the current line not held (past what could be kept).
    spilled: u64,
    line_no: u64,
    kept_bytes: u64,
    found: Records,
}

/// Bytes of a line always held, so that a line past the budget can still be told apart.
const PREFIX: usize = 256;

impl Scan {
    fn room(&self) -> usize {
        let left = self.limits.bytes.0.saturating_sub(self.kept_bytes);
        usize::try_from(left).unwrap_or(usize::MAX).max(PREFIX)
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], true),
                None => (bytes, false),
            };
            let room = self.room().saturating_sub(self.line.len());
            let held = part.len().min(room);
            self.line.extend_from_slice(&part[..held]);
            self.spilled += (part.len() - held) as u64;
            bytes = &bytes[part.len() + usize::from(ended)..];
            if ended {
                self.end_line(true);
            }
        }
    }

    /// The current line ended: at a newline or the end of the stream (`complete`), or where
    /// the writer was stopped (it may be cut).
    fn end_line(&mut self, complete: bool) {
        self.line_no += 1;
        let line = std::mem::take(&mut self.line);
        let spilled = std::mem::take(&mut self.spilled);
        let text = line.trim_ascii();
        if text.is_empty() && spilled == 0 {
            return;
        }
        let whole = spilled == 0 && complete;
        // A record is one JSON object per line naming a `wrun_` key; a line too long to hold
        // whole that starts as an object is counted as one (dropped), never read in part.
        let record = text.starts_with(b"{") && (!whole || contains(text, b"\"wrun_"));
        if !record {
            self.found.other_lines += 1;
            return;
        }
        let len = text.len() as u64 + spilled;
        let fits = whole
            && self.kept_count() < u64::from(self.limits.count)
            && self.kept_bytes + len <= self.limits.bytes.0;
        if !fits {
            self.found.dropped += 1;
            self.found.dropped_bytes += len;
            return;
        }
        self.kept_bytes += len;
        match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(text) {
            Ok(value) => self.found.kept.push(Record {
                line: self.line_no,
                value,
            }),
            Err(e) => self.found.malformed.push((self.line_no, e.to_string())),
        }
    }

    fn kept_count(&self) -> u64 {
        (self.found.kept.len() + self.found.malformed.len()) as u64
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
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
                records: None,
            })),
        }
    }

    /// A capture as [`Capture::new`] that also reads the stream's records as they are
    /// written, keeping at most `limits` of them (see [`Records`]).
    pub fn with_records(cap: ByteSize, limits: RecordLimits) -> Self {
        let capture = Self::new(cap);
        capture
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .records = Some(Scan {
            limits,
            line: Vec::new(),
            spilled: 0,
            line_no: 0,
            kept_bytes: 0,
            found: Records::default(),
        });
        capture
    }

    /// The records read. Call once, when the stream has ended; `whole` says whether the
    /// writer ended on its own (it exited): only then is a last line without a newline taken
    /// as whole, else (killed at the timeout, say) it may be cut, and a record there is
    /// counted as dropped. Empty for a capture made without records.
    pub fn records(&self, whole: bool) -> Records {
        let mut ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(scan) = ring.records.as_mut() else {
            return Records::default();
        };
        if !scan.line.is_empty() || scan.spilled > 0 {
            scan.end_line(whole);
        }
        std::mem::take(&mut scan.found)
    }

    /// Appends `bytes`. Never fails and never keeps more than the cap.
    pub fn push(&self, bytes: &[u8]) {
        let mut ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        ring.total = ring.total.saturating_add(bytes.len() as u64);
        if let Some(scan) = ring.records.as_mut() {
            scan.push(bytes);
        }
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

    fn scan(limits: RecordLimits, chunks: &[&[u8]]) -> Records {
        let c = Capture::with_records(ByteSize(64), limits);
        for chunk in chunks {
            c.push(chunk);
        }
        c.records(true)
    }

    const ROOMY: RecordLimits = RecordLimits {
        count: 100,
        bytes: ByteSize(1 << 20),
    };

    #[test]
    fn records_are_read_whole_across_writes_whatever_the_text_cap_keeps() {
        let record = br#"{"wrun_finding":1,"path":"a.rs","rule":"r","severity":"note","message":"m"}"#;
        let mut chunks: Vec<&[u8]> = Vec::new();
        for _ in 0..10 {
            chunks.extend([
                &record[..7],
                &record[7..40],
                &record[40..],
                b"\r\nprogress: text\n",
            ]);
        }
        chunks.push(b"  \n{\"not\": \"ours\"}\n");
        chunks.push(record); // the last line, without a newline
        let found = scan(ROOMY, &chunks);
        assert_eq!(found.kept.len(), 11);
        assert_eq!(found.kept[0].line, 1);
        assert_eq!(found.kept[1].line, 3);
        assert_eq!(found.kept[10].line, 23);
        assert_eq!(found.kept[0].value["path"], "a.rs");
        assert_eq!((found.dropped, found.other_lines), (0, 11));
        assert!(found.malformed.is_empty());
    }

    #[test]
    fn records_past_the_count_or_bytes_are_dropped_whole_and_counted() {
        let record: &[u8] = b"{\"wrun_finding\":1}\n";
        let by_count = scan(
            RecordLimits {
                count: 3,
                bytes: ByteSize(1 << 20),
            },
            &[record; 10],
        );
        assert_eq!((by_count.kept.len(), by_count.dropped), (3, 7));
        assert_eq!(by_count.dropped_bytes, 7 * (record.len() as u64 - 1));
        let by_bytes = scan(
            RecordLimits {
                count: 100,
                bytes: ByteSize(40),
            },
            &[record; 10],
        );
        assert_eq!((by_bytes.kept.len(), by_bytes.dropped), (2, 8));
        // One record larger than the whole budget: dropped, and the ones after it still fit.
        let huge = format!("{{\"wrun_finding\":1,\"message\":\"{}\"}}\n", "x".repeat(5000));
        let found = scan(
            RecordLimits {
                count: 100,
                bytes: ByteSize(1000),
            },
            &[huge.as_bytes(), record, huge.as_bytes(), record],
        );
        assert_eq!((found.kept.len(), found.dropped), (2, 2));
        assert_eq!(found.dropped_bytes, 2 * (huge.len() as u64 - 1));
    }

    #[test]
    fn a_last_line_is_a_record_only_if_the_writer_ended_on_its_own() {
        for (whole, kept) in [(true, 2), (false, 1)] {
            let c = Capture::with_records(ByteSize(64), ROOMY);
            c.push(b"{\"wrun_finding\":1}\n{\"wrun_finding\":2}");
            let found = c.records(whole);
            assert_eq!(found.kept.len(), kept);
            assert_eq!(found.dropped, 2 - kept as u64);
        }
    }

    #[test]
    fn a_record_line_that_is_not_json_is_malformed_with_its_line() {
        let found = scan(
            ROOMY,
            &[b"text\n{\"wrun_finding\":1,\"pa\n{\"wrun_finding\":1}\n"],
        );
        assert_eq!(found.malformed.len(), 1);
        assert_eq!(found.malformed[0].0, 2);
        assert_eq!(found.kept.len(), 1);
        assert_eq!(found.kept[0].line, 3);
    }

    #[test]
    fn memory_held_by_the_scanner_is_bounded_by_the_budget() {
        let c = Capture::with_records(
            ByteSize(16),
            RecordLimits {
                count: 10,
                bytes: ByteSize(1024),
            },
        );
        c.push(b"{\"wrun_finding\":");
        for _ in 0..1000 {
            c.push(&[b'x'; 4096]);
        }
        {
            let ring = c.inner.lock().expect("lock");
            let held = ring.records.as_ref().map_or(0, |s| s.line.capacity());
            assert!(held <= 4 * 1024, "{held}");
        }
        let found = c.records(true);
        assert_eq!((found.kept.len(), found.dropped), (0, 1));
        assert_eq!(found.dropped_bytes, 16 + 1000 * 4096);
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
