//! Typed resource limits shared by every backend.
//!
//! [`Limits::default`] is the one place where the defaults live; [`Limits::validate`] is the
//! one place where a limit is checked against the hard ceilings below. A zero limit is an
//! error, never "unlimited": the seed 003 review found a zero or negative cap silently
//! disabling truncation, and wrun must not have that bug.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A number of bytes. Parses and prints with binary units (`64KiB`, `256MiB`, `1GiB`);
/// `KB`/`MB`/`GB` are accepted as the same binary units because that is what people mean
/// when they type them for a cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` bytes.
    pub const fn b(n: u64) -> Self {
        Self(n)
    }
    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        Self(n * 1024)
    }
    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        Self(n * 1024 * 1024)
    }
    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        Self(n * 1024 * 1024 * 1024)
    }
    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
    /// The number of bytes as a `usize`, saturating on 32-bit hosts.
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// Why a byte size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid byte size {input:?}: expected a whole number with an optional unit (B, KiB, MiB, GiB), e.g. 64KiB"
)]
pub struct ParseByteSizeError {
    input: String,
}

impl FromStr for ByteSize {
    type Err = ParseByteSizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseByteSizeError { input: s.to_owned() };
        let trimmed = s.trim();
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        if digits.is_empty() {
            return Err(err());
        }
        let n: u64 = digits.parse().map_err(|_| err())?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            _ => return Err(err()),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(err)
    }
}

/// Per-stream output ceiling no job can exceed (seed 003: "hard ceiling 10MB"). A review host
/// hands helper output to a model and to its database; more than this per stream is a flood,
/// not a finding.
pub const OUTPUT_CAP_CEILING: ByteSize = ByteSize::mib(10);

/// Memory ceiling: the whole 32-bit wasm address space. Native helpers get the same ceiling
/// for their address-space limit.
pub const MEMORY_CEILING: ByteSize = ByteSize::gib(4);

/// Wall-clock ceiling. A review that waits longer than an hour for one helper has failed
/// anyway; a bound here keeps a mistyped `--timeout` from parking a worker for days.
pub const TIMEOUT_CEILING: Duration = Duration::from_secs(60 * 60);

/// Largest file a native helper may ever be allowed to write.
pub const MAX_FILE_SIZE_CEILING: ByteSize = ByteSize::gib(64);

/// Largest `/tmp` a native helper may ever get (it is memory: tmpfs).
pub const TMP_SIZE_CEILING: ByteSize = ByteSize::gib(4);

/// Most processes a native helper may ever get.
pub const MAX_PROCESSES_CEILING: u32 = 4096;

/// Most open files per native process.
pub const MAX_OPEN_FILES_CEILING: u32 = 65536;

/// The limits one job runs under. Every field is enforced by every backend that can run the
/// job; see each field for the mechanism.
///
/// Defaults ([`Limits::default`]):
///
/// | limit | default | ceiling |
/// | --- | --- | --- |
/// | `timeout` | 30 s | 1 h |
/// | `fuel` | none (only wall time bounds CPU) | `u64::MAX` |
/// | `memory` | 256 MiB | 4 GiB |
/// | `stdout_cap` | 1 MiB | 10 MiB |
/// | `stderr_cap` | 256 KiB | 10 MiB |
/// | `cpu` (native) | none (only wall time) | 1 h |
/// | `max_file_size` (native) | 1 GiB | 64 GiB |
/// | `max_processes` (native) | 256 | 4096 |
/// | `max_open_files` (native) | 1024 | 65536 |
/// | `tmp_size` (native `/tmp`) | 256 MiB | 4 GiB |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Limits {
    /// Wall-clock time from start to the end of the helper. wasm: epoch interruption plus a
    /// timer around the whole call, so a guest blocked in a host call is stopped too.
    #[serde(with = "duration_ms")]
    pub timeout: Duration,
    /// Deterministic instruction budget (wasm only). `None` means no fuel metering.
    pub fuel: Option<u64>,
    /// Linear memory (wasm: all memories of the instance together).
    pub memory: ByteSize,
    /// Bytes of stdout kept (head and tail); everything beyond is counted and cut.
    pub stdout_cap: ByteSize,
    /// Bytes of stderr kept (head and tail); everything beyond is counted and cut.
    pub stderr_cap: ByteSize,
    /// CPU time of each native process (`RLIMIT_CPU`): the native analogue of fuel.
    #[serde(with = "opt_duration_ms")]
    pub cpu: Option<Duration>,
    /// Largest file a native helper may write (`RLIMIT_FSIZE`): a disk fill stops here.
    pub max_file_size: ByteSize,
    /// Processes and threads of a native helper (a pids cgroup where wrun can create one,
    /// else `RLIMIT_NPROC`; the Outcome says which held).
    pub max_processes: u32,
    /// Open file descriptors per native process (`RLIMIT_NOFILE`).
    pub max_open_files: u32,
    /// Size of the native sandbox's private `/tmp` (a tmpfs).
    pub tmp_size: ByteSize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            fuel: None,
            memory: ByteSize::mib(256),
            stdout_cap: ByteSize::mib(1),
            stderr_cap: ByteSize::kib(256),
            cpu: None,
            max_file_size: ByteSize::gib(1),
            max_processes: 256,
            max_open_files: 1024,
            tmp_size: ByteSize::mib(256),
        }
    }
}

/// A limit that is zero or above its ceiling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// The limit is zero. Zero never means "unlimited" in wrun.
    #[error(
        "{name} must be greater than zero (zero is not \"unlimited\"; omit the limit to get the default)"
    )]
    Zero {
        /// Which limit.
        name: &'static str,
    },
    /// The limit is above the hard ceiling.
    #[error("{name} {value} is above the ceiling of {ceiling}; lower it")]
    AboveCeiling {
        /// Which limit.
        name: &'static str,
        /// The value asked for.
        value: String,
        /// The ceiling.
        ceiling: String,
    },
}

impl Limits {
    /// Sets the wall-clock timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Turns on fuel metering with this budget.
    pub fn with_fuel(mut self, fuel: u64) -> Self {
        self.fuel = Some(fuel);
        self
    }
    /// Sets the memory limit.
    pub fn with_memory(mut self, memory: ByteSize) -> Self {
        self.memory = memory;
        self
    }
    /// Sets the stdout cap.
    pub fn with_stdout_cap(mut self, cap: ByteSize) -> Self {
        self.stdout_cap = cap;
        self
    }
    /// Sets the stderr cap.
    pub fn with_stderr_cap(mut self, cap: ByteSize) -> Self {
        self.stderr_cap = cap;
        self
    }

    /// Sets the CPU-time limit of native processes.
    pub fn with_cpu(mut self, cpu: Duration) -> Self {
        self.cpu = Some(cpu);
        self
    }
    /// Sets the largest file a native helper may write.
    pub fn with_max_file_size(mut self, size: ByteSize) -> Self {
        self.max_file_size = size;
        self
    }
    /// Sets the process limit of native helpers.
    pub fn with_max_processes(mut self, n: u32) -> Self {
        self.max_processes = n;
        self
    }
    /// Sets the open-file limit of native helpers.
    pub fn with_max_open_files(mut self, n: u32) -> Self {
        self.max_open_files = n;
        self
    }
    /// Sets the size of the native sandbox's `/tmp` (and of its `/dev/shm`).
    pub fn with_tmp_size(mut self, size: ByteSize) -> Self {
        self.tmp_size = size;
        self
    }

    /// Checks every limit: none may be zero, none may exceed its ceiling.
    pub fn validate(&self) -> Result<(), LimitError> {
        if self.timeout.is_zero() {
            return Err(LimitError::Zero { name: "timeout" });
        }
        if self.timeout > TIMEOUT_CEILING {
            return Err(LimitError::AboveCeiling {
                name: "timeout",
                value: format!("{:?}", self.timeout),
                ceiling: format!("{:?}", TIMEOUT_CEILING),
            });
        }
        if self.fuel == Some(0) {
            return Err(LimitError::Zero { name: "fuel" });
        }
        check("memory", self.memory, MEMORY_CEILING)?;
        check("stdout cap", self.stdout_cap, OUTPUT_CAP_CEILING)?;
        check("stderr cap", self.stderr_cap, OUTPUT_CAP_CEILING)?;
        if let Some(cpu) = self.cpu {
            if cpu < Duration::from_secs(1) {
                return Err(LimitError::Zero {
                    name: "cpu (whole seconds)",
                });
            }
            if cpu > TIMEOUT_CEILING {
                return Err(LimitError::AboveCeiling {
                    name: "cpu",
                    value: format!("{cpu:?}"),
                    ceiling: format!("{TIMEOUT_CEILING:?}"),
                });
            }
        }
        check("max file size", self.max_file_size, MAX_FILE_SIZE_CEILING)?;
        check("tmp size", self.tmp_size, TMP_SIZE_CEILING)?;
        check("max processes", self.max_processes, MAX_PROCESSES_CEILING)?;
        check("max open files", self.max_open_files, MAX_OPEN_FILES_CEILING)?;
        Ok(())
    }

    /// wrun's hard ceilings, as limits: the most any job may have, whatever the policy (a
    /// policy's `[ceilings]` start here). Fuel and CPU have none (unmetered is allowed; a
    /// metered run is still bounded by [`TIMEOUT_CEILING`]).
    pub fn ceilings() -> Self {
        Self {
            timeout: TIMEOUT_CEILING,
            fuel: None,
            memory: MEMORY_CEILING,
            stdout_cap: OUTPUT_CAP_CEILING,
            stderr_cap: OUTPUT_CAP_CEILING,
            cpu: None,
            max_file_size: MAX_FILE_SIZE_CEILING,
            max_processes: MAX_PROCESSES_CEILING,
            max_open_files: MAX_OPEN_FILES_CEILING,
            tmp_size: TMP_SIZE_CEILING,
        }
    }
}

/// Zero (the type's default) is an error, and so is a value above `ceiling`.
fn check<T: PartialOrd + Default + fmt::Display>(
    name: &'static str,
    value: T,
    ceiling: T,
) -> Result<(), LimitError> {
    if value == T::default() {
        return Err(LimitError::Zero { name });
    }
    if value > ceiling {
        return Err(LimitError::AboveCeiling {
            name,
            value: value.to_string(),
            ceiling: ceiling.to_string(),
        });
    }
    Ok(())
}

/// Serializes an optional `Duration` as whole milliseconds.
pub(crate) mod opt_duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|v| v.map(Duration::from_millis))
    }
}

/// Serializes a `Duration` as whole milliseconds, the unit people read in JSON.
pub(crate) mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse_and_print() {
        assert_eq!("64KiB".parse::<ByteSize>(), Ok(ByteSize::kib(64)));
        assert_eq!("64kb".parse::<ByteSize>(), Ok(ByteSize::kib(64)));
        assert_eq!("256MiB".parse::<ByteSize>(), Ok(ByteSize::mib(256)));
        assert_eq!("1 GiB".parse::<ByteSize>(), Ok(ByteSize::gib(1)));
        assert_eq!("17".parse::<ByteSize>(), Ok(ByteSize(17)));
        assert_eq!(ByteSize::kib(64).to_string(), "64KiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        for bad in ["", "KiB", "-1", "1.5MiB", "12 parsecs", "99999999999999999999GiB"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn defaults_are_valid() {
        Limits::default().validate().expect("defaults validate");
    }

    #[test]
    fn zero_is_never_unlimited() {
        let base = Limits::default();
        for limits in [
            base.clone().with_stdout_cap(ByteSize(0)),
            base.clone().with_stderr_cap(ByteSize(0)),
            base.clone().with_memory(ByteSize(0)),
            base.clone().with_fuel(0),
            base.clone().with_timeout(Duration::ZERO),
        ] {
            assert!(matches!(limits.validate(), Err(LimitError::Zero { .. })));
        }
    }

    #[test]
    fn ceilings_hold() {
        let base = Limits::default();
        let over = base.clone().with_stdout_cap(ByteSize(OUTPUT_CAP_CEILING.0 + 1));
        assert!(matches!(over.validate(), Err(LimitError::AboveCeiling { .. })));
        let over = base.clone().with_memory(ByteSize(MEMORY_CEILING.0 + 1));
        assert!(matches!(over.validate(), Err(LimitError::AboveCeiling { .. })));
        let over = base.with_timeout(TIMEOUT_CEILING + Duration::from_secs(1));
        assert!(matches!(over.validate(), Err(LimitError::AboveCeiling { .. })));
    }
}
