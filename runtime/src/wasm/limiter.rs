//! The per-store resource limiter: linear memory and tables against the job's memory limit,
//! one instance, one memory. A growth past the limit is a trap (not a `-1` the guest could
//! ignore), and the limiter remembers it so the run ends as "out of memory", not as an
//! anonymous trap.

use wasmtime::ResourceLimiter;

use crate::limits::ByteSize;

/// Table elements a helper may have. Each element is a pointer on the host; a Rust helper
/// needs a few thousand. The bound stops a `table.grow` bomb that the memory limit does not
/// see.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    peak: usize,
    hit: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the helper asked for {desired} bytes of {what}, above its limit of {limit}")]
pub(crate) struct LimitHit {
    what: &'static str,
    desired: usize,
    limit: usize,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: ByteSize) -> Self {
        Self {
            limit: limit.as_usize(),
            peak: 0,
            hit: false,
        }
    }

    /// Largest linear memory granted.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// Whether a growth was refused.
    pub(crate) fn hit(&self) -> bool {
        self.hit
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            return Err(wasmtime::Error::new(LimitHit {
                what: "linear memory",
                desired,
                limit: self.limit,
            }));
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.hit = true;
            return Err(wasmtime::Error::new(LimitHit {
                what: "table elements",
                desired,
                limit: MAX_TABLE_ELEMENTS,
            }));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}
