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

/// Most findings kept from one run: beyond this a helper is reporting noise, not review
/// comments.
pub const FINDINGS_CEILING: u32 = 100_000;

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

/// The largest WebAssembly module wrun reads or compiles (checked before reading it whole):
/// [`crate::WasmConfig`]'s default, and the host's limit on a module from a base commit.
pub const MAX_MODULE_SIZE: ByteSize = ByteSize::mib(128);

/// Most open files per native process.
pub const MAX_OPEN_FILES_CEILING: u32 = 65536;

/// Which helpers a limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Every helper.
    All,
    /// WebAssembly helpers only.
    Wasm,
    /// Native helpers only.
    Native,
}

/// One limit, as every layer names it: its field (and key in policy files and the Outcome),
/// the command-line flag, what its values look like, and which helpers it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitField {
    /// The field and policy key (`max_open_files`).
    pub name: &'static str,
    /// The command-line flag, without `--` (`max-open-files`).
    pub flag: &'static str,
    /// The form of a value (`30s`, `256MiB`, a count).
    pub value: &'static str,
    /// What it bounds, in a sentence.
    pub help: &'static str,
    /// Which helpers it applies to.
    pub applies: Applies,
}

/// A value of one limit: parsed from text with units, zero detected, shown to people.
trait LimitValue: Copy + PartialOrd {
    /// The unit of the value's number in JSON (`ms`, `bytes`, `count`).
    const UNIT: &'static str;
    fn parse_text(s: &str) -> Result<Self, String>;
    fn is_zero(&self) -> bool;
    fn show(&self) -> String;
}

impl LimitValue for Duration {
    const UNIT: &'static str = "ms";
    fn parse_text(s: &str) -> Result<Self, String> {
        humantime::parse_duration(s.trim())
            .map_err(|e| format!("invalid duration {s:?}: {e} (write e.g. 30s, 500ms, 2m)"))
    }
    fn is_zero(&self) -> bool {
        Duration::is_zero(self)
    }
    fn show(&self) -> String {
        humantime::format_duration(*self).to_string()
    }
}

impl LimitValue for ByteSize {
    const UNIT: &'static str = "bytes";
    fn parse_text(s: &str) -> Result<Self, String> {
        s.parse().map_err(|e: ParseByteSizeError| e.to_string())
    }
    fn is_zero(&self) -> bool {
        self.0 == 0
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

macro_rules! count_value {
    ($($t:ty),*) => {$(
        impl LimitValue for $t {
            const UNIT: &'static str = "count";
            fn parse_text(s: &str) -> Result<Self, String> {
                s.trim().parse().map_err(|_| format!("invalid number {s:?}: expected a whole number"))
            }
            fn is_zero(&self) -> bool {
                *self == 0
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
count_value!(u32, u64);

/// Defines the limits once: [`Limits`] (every value), [`LimitsSpec`] (some values, as a policy
/// file, a helper definition or the command line gives them), [`LIMIT_FIELDS`], and how a
/// spec applies over limits and limits are checked against ceilings. A field listed here is
/// a field everywhere; `check_exhaustive` makes a field of `Limits` missing here a compile
/// error.
macro_rules! limits {
    ($(
        $(#[doc = $doc:literal])*
        $(#[serde($($serde:tt)*)])?
        $field:ident: $ty:ty [$value_ty:ty] = $default:expr, ceiling $ceiling:expr,
            flag $flag:literal, value $value:literal, $applies:ident, $help:literal;
    )*) => {
        /// The limits one job runs under. Every field is enforced by every backend that can
        /// run the job; see each field for the mechanism.
        ///
        /// Defaults ([`Limits::default`]) and ceilings ([`Limits::ceilings`]):
        ///
        /// | limit | default | ceiling |
        /// | --- | --- | --- |
        /// | `timeout` | 30 s | 1 h |
        /// | `fuel` (wasm) | none (only wall time bounds CPU) | none |
        /// | `memory` | 256 MiB | 4 GiB |
        /// | `stdout_cap` | 1 MiB | 10 MiB |
        /// | `stderr_cap` | 256 KiB | 10 MiB |
        /// | `findings` | 1000 | 100,000 |
        /// | `findings_cap` | 1 MiB | 10 MiB |
        /// | `cpu` (native) | none (only wall time) | 1 h |
        /// | `max_file_size` (native) | 1 GiB | 64 GiB |
        /// | `max_processes` (native) | 256 | 4096 |
        /// | `max_open_files` (native) | 1024 | 65536 |
        /// | `tmp_size` (native `/tmp`) | 256 MiB | 4 GiB |
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[non_exhaustive]
        pub struct Limits {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                pub $field: $ty,
            )*
        }

        impl Default for Limits {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        impl Limits {
            /// wrun's hard ceilings, as limits: the most any job may have, whatever the policy
            /// (a policy's `[ceilings]` start here). Fuel and CPU have none here (unmetered is
            /// allowed; a metered run is still bounded by [`TIMEOUT_CEILING`]).
            pub fn ceilings() -> Self {
                Self { $($field: $ceiling,)* }
            }

            /// Each limit as a policy file writes it (`30s`, `256MiB`, a count), `off` where
            /// an optional one is unset.
            pub fn shown(&self) -> Vec<(&'static str, String)> {
                vec![$( (stringify!($field), show_field(&self.$field)), )*]
            }

            /// The unit of each limit's number in the JSON form (`ms`, `bytes`, `count`).
            pub fn units() -> Vec<(&'static str, &'static str)> {
                vec![$( (stringify!($field), unit_of::<$ty>()), )*]
            }

            /// Every limit within `ceilings`. An optional limit (fuel, CPU) with a ceiling must
            /// be set: a ceiling on it means the run must be metered.
            pub fn check_within(&self, ceilings: &Limits) -> Result<(), LimitError> {
                $( within(stringify!($field), &self.$field, &ceilings.$field)?; )*
                Ok(())
            }

            /// No limit is zero.
            fn check_nonzero(&self) -> Result<(), LimitError> {
                $(
                    if Field::is_zero(&self.$field) {
                        return Err(LimitError::Zero { name: stringify!($field) });
                    }
                )*
                Ok(())
            }
        }

        /// Every limit, as each layer names it.
        pub const LIMIT_FIELDS: &[LimitField] = &[$(
            LimitField {
                name: stringify!($field),
                flag: $flag,
                value: $value,
                help: $help,
                applies: Applies::$applies,
            },
        )*];

        /// Some limits: what a policy file's `[limits]`/`[ceilings]`, a helper definition's
        /// `limits` or the command line's flags give, applied over other limits with
        /// [`LimitsSpec::apply`]. In files, durations and sizes are strings with units
        /// (`"30s"`, `"256MiB"`; a size may also be a number of bytes), counts are numbers.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(deny_unknown_fields)]
        pub struct LimitsSpec {
            $(
                #[doc = $help]
                #[serde(default, skip_serializing_if = "Option::is_none", with = "spec_value")]
                #[cfg_attr(feature = "schema", schemars(with = "Option<spec_value::LimitText>"))]
                pub $field: Option<$value_ty>,
            )*
        }

        impl LimitsSpec {
            /// `base` with the values given here.
            pub fn apply(&self, base: &Limits) -> Limits {
                let mut out = base.clone();
                $(
                    if let Some(v) = self.$field {
                        out.$field = Field::from_value(v);
                    }
                )*
                out
            }

            /// Sets the limit named `name` (a field or flag name) from text with units.
            pub fn set(&mut self, name: &str, text: &str) -> Result<(), LimitError> {
                $(
                    if name == stringify!($field) || name == $flag {
                        let v = <$value_ty as LimitValue>::parse_text(text).map_err(|reason| {
                            LimitError::Invalid { name: stringify!($field), reason }
                        })?;
                        self.$field = Some(v);
                        return Ok(());
                    }
                )*
                Err(LimitError::Unknown { name: name.to_owned() })
            }

            /// The names of the limits given here.
            pub fn given(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if self.$field.is_some() { out.push(stringify!($field)); } )*
                out
            }
        }

        /// A compile error when a field of [`Limits`] is not listed in the macro.
        #[allow(dead_code)]
        fn check_exhaustive(l: &Limits) {
            let Limits { $($field: _,)* } = l;
        }
    };
}

/// A field of [`Limits`]: a value, or an optional one (fuel, CPU).
trait Field: Sized {
    type Value: LimitValue;
    fn is_zero(&self) -> bool;
    fn from_value(v: Self::Value) -> Self;
    /// `None` where the field is unset.
    fn value(&self) -> Option<Self::Value>;
}

impl<T: LimitValue> Field for T {
    type Value = T;
    fn is_zero(&self) -> bool {
        LimitValue::is_zero(self)
    }
    fn from_value(v: T) -> Self {
        v
    }
    fn value(&self) -> Option<T> {
        Some(*self)
    }
}

impl<T: LimitValue> Field for Option<T> {
    type Value = T;
    fn is_zero(&self) -> bool {
        self.is_some_and(|v| LimitValue::is_zero(&v))
    }
    fn from_value(v: T) -> Self {
        Some(v)
    }
    fn value(&self) -> Option<T> {
        *self
    }
}

/// A limit as people write it; `off` for an unset optional one.
fn show_field<F: Field>(field: &F) -> String {
    field.value().map_or_else(|| "off".to_owned(), |v| v.show())
}

/// The unit of a limit's number in JSON.
fn unit_of<F: Field>() -> &'static str {
    <F::Value as LimitValue>::UNIT
}

/// `value` within `ceiling`; an optional value with a ceiling must be set.
fn within<F: Field>(name: &'static str, value: &F, ceiling: &F) -> Result<(), LimitError> {
    let Some(c) = ceiling.value() else {
        return Ok(());
    };
    match value.value() {
        Some(v) if v > c => Err(LimitError::AboveCeiling {
            name,
            value: v.show(),
            ceiling: c.show(),
        }),
        Some(_) => Ok(()),
        None => Err(LimitError::AboveCeiling {
            name,
            value: "unmetered".to_owned(),
            ceiling: c.show(),
        }),
    }
}

limits! {
    /// Wall-clock time from start to the end of the helper. wasm: epoch interruption plus a
    /// timer around the whole call, so a guest blocked in a host call is stopped too.
    #[serde(with = "duration_ms")]
    timeout: Duration [Duration] = Duration::from_secs(30), ceiling TIMEOUT_CEILING,
        flag "timeout", value "DURATION", All, "Wall-clock limit, e.g. 30s, 500ms, 2m";
    /// Deterministic instruction budget (wasm only). `None` means no fuel metering.
    fuel: Option<u64> [u64] = None, ceiling None,
        flag "fuel", value "UNITS", Wasm,
        "Instruction budget in fuel units (roughly 10 billion per CPU-second); unset: unmetered";
    /// Linear memory (wasm: all memories of the instance together); a native helper's address
    /// space per process and, with its `/tmp`, its memory cgroup.
    memory: ByteSize [ByteSize] = ByteSize::mib(256), ceiling MEMORY_CEILING,
        flag "memory", value "SIZE", All,
        "Memory: a wasm helper's linear memory, a native helper's address space (and, with its /tmp, its memory cgroup)";
    /// Bytes of stdout kept (head and tail); everything beyond is counted and cut.
    stdout_cap: ByteSize [ByteSize] = ByteSize::mib(1), ceiling OUTPUT_CAP_CEILING,
        flag "stdout-cap", value "SIZE", All, "Bytes of stdout kept (head and tail; the middle is cut)";
    /// Bytes of stderr kept (head and tail); everything beyond is counted and cut.
    stderr_cap: ByteSize [ByteSize] = ByteSize::kib(256), ceiling OUTPUT_CAP_CEILING,
        flag "stderr-cap", value "SIZE", All, "Bytes of stderr kept (head and tail; the middle is cut)";
    /// Findings (records of the wrun-guest protocol, one JSON object per stdout line) kept
    /// whole, read from stdout as it is written, whatever the stdout cap keeps; more are
    /// counted as dropped, never cut.
    findings: u32 [u32] = 1000, ceiling FINDINGS_CEILING,
        flag "findings", value "N", All,
        "Findings kept whole from stdout (more are counted as dropped)";
    /// Bytes of findings kept whole; a record that would pass it is counted as dropped.
    findings_cap: ByteSize [ByteSize] = ByteSize::mib(1), ceiling OUTPUT_CAP_CEILING,
        flag "findings-cap", value "SIZE", All,
        "Bytes of findings kept whole (a record past it is counted as dropped)";
    /// CPU time of each native process (`RLIMIT_CPU`): the native analogue of fuel.
    #[serde(with = "opt_duration_ms")]
    cpu: Option<Duration> [Duration] = None, ceiling None,
        flag "cpu", value "DURATION", Native, "CPU time per process (whole seconds), e.g. 10s; unset: none";
    /// Largest file a native helper may write (`RLIMIT_FSIZE`): a disk fill stops here.
    max_file_size: ByteSize [ByteSize] = ByteSize::gib(1), ceiling MAX_FILE_SIZE_CEILING,
        flag "max-file-size", value "SIZE", Native, "Largest file the helper may write";
    /// Processes and threads of a native helper (a pids cgroup where wrun can create one,
    /// else `RLIMIT_NPROC`; the Outcome says which held).
    max_processes: u32 [u32] = 256, ceiling MAX_PROCESSES_CEILING,
        flag "max-processes", value "N", Native, "Processes and threads";
    /// Open file descriptors per native process (`RLIMIT_NOFILE`).
    max_open_files: u32 [u32] = 1024, ceiling MAX_OPEN_FILES_CEILING,
        flag "max-open-files", value "N", Native, "Open files per process";
    /// Size of the native sandbox's private `/tmp` (a tmpfs; `/dev/shm` too).
    tmp_size: ByteSize [ByteSize] = ByteSize::mib(256), ceiling TMP_SIZE_CEILING,
        flag "tmp-size", value "SIZE", Native, "Size of the private /tmp (and of /dev/shm)";
}

/// Serde for a [`LimitsSpec`] value: text with units, or a number (a count, fuel, bytes).
mod spec_value {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::LimitValue;

    /// A value as written: text with units, or a number.
    #[derive(Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(untagged)]
    pub(super) enum LimitText {
        /// `"30s"`, `"256MiB"`.
        Text(String),
        /// A count, fuel units or bytes.
        Number(u64),
        /// Refused: a limit is never negative.
        #[cfg_attr(feature = "schema", schemars(skip))]
        Negative(i64),
        /// Refused: a limit is a whole number.
        #[cfg_attr(feature = "schema", schemars(skip))]
        Fraction(f64),
    }

    pub(super) fn serialize<T: LimitValue, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&v.show()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, T: LimitValue, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
        let text = match LimitText::deserialize(d)? {
            LimitText::Text(t) => t,
            LimitText::Number(n) => n.to_string(),
            LimitText::Negative(n) => {
                return Err(serde::de::Error::custom(format!(
                    "invalid value {n}: a limit is never negative"
                )));
            }
            LimitText::Fraction(n) => {
                return Err(serde::de::Error::custom(format!(
                    "invalid value {n}: a limit is a whole number (or text with a unit, \"1.5s\" is \"1500ms\")"
                )));
            }
        };
        T::parse_text(&text).map(Some).map_err(serde::de::Error::custom)
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
    /// The limit is above its ceiling (wrun's, or a policy's).
    #[error("{name} {value} is above the ceiling of {ceiling}; lower it")]
    AboveCeiling {
        /// Which limit.
        name: &'static str,
        /// The value asked for.
        value: String,
        /// The ceiling.
        ceiling: String,
    },
    /// A value that does not parse.
    #[error("{name}: {reason}")]
    Invalid {
        /// Which limit.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// No limit has this name.
    #[error("no limit is called {name:?}")]
    Unknown {
        /// The name given.
        name: String,
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
    /// How many records a stdout capture keeps (`findings`, `findings_cap`).
    pub fn record_limits(&self) -> crate::capture::RecordLimits {
        crate::capture::RecordLimits {
            count: self.findings,
            bytes: self.findings_cap,
        }
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

    /// Checks every limit: none may be zero, none may exceed wrun's hard ceiling, and a CPU
    /// limit is whole seconds of at most the timeout ceiling.
    pub fn validate(&self) -> Result<(), LimitError> {
        self.check_nonzero()?;
        self.check_within(&Limits::ceilings())?;
        if let Some(cpu) = self.cpu {
            if cpu < Duration::from_secs(1) {
                return Err(LimitError::Zero {
                    name: "cpu (whole seconds)",
                });
            }
            within("cpu", &cpu, &TIMEOUT_CEILING)?;
        }
        Ok(())
    }
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
    fn a_spec_parses_from_a_file_applies_over_limits_and_sets_from_flags() {
        let spec: LimitsSpec = serde_json::from_str(
            r#"{"timeout":"90s","memory":"512MiB","max_processes":64,"tmp_size":1048576,"fuel":5000}"#,
        )
        .expect("parses");
        let l = spec.apply(&Limits::default());
        assert_eq!(l.timeout, Duration::from_secs(90));
        assert_eq!(l.memory, ByteSize::mib(512));
        assert_eq!(l.max_processes, 64);
        assert_eq!(l.tmp_size, ByteSize::mib(1));
        assert_eq!(l.fuel, Some(5000));
        assert_eq!(l.stdout_cap, Limits::default().stdout_cap);
        assert_eq!(
            spec.given(),
            ["timeout", "fuel", "memory", "max_processes", "tmp_size"]
        );
        for bad in [
            r#"{"timeout":"soon"}"#,
            r#"{"memory":"lots"}"#,
            r#"{"max_processes":"many"}"#,
            r#"{"nope":1}"#,
        ] {
            assert!(serde_json::from_str::<LimitsSpec>(bad).is_err(), "{bad}");
        }
        let mut flags = LimitsSpec::default();
        for field in LIMIT_FIELDS {
            let value = match field.value {
                "DURATION" => "2s",
                "SIZE" => "1MiB",
                _ => "7",
            };
            flags.set(field.flag, value).expect(field.flag);
        }
        assert_eq!(flags.given().len(), LIMIT_FIELDS.len());
        assert!(matches!(
            flags.set("max-open-files", "x"),
            Err(LimitError::Invalid { .. })
        ));
        assert!(matches!(
            flags.set("max-open-file", "1"),
            Err(LimitError::Unknown { .. })
        ));
    }

    #[test]
    fn a_ceiling_on_fuel_or_cpu_means_the_run_must_be_metered() {
        let mut ceilings = Limits::ceilings();
        ceilings.fuel = Some(1000);
        assert!(Limits::default().check_within(&ceilings).is_err());
        assert!(Limits::default().with_fuel(999).check_within(&ceilings).is_ok());
        assert!(Limits::default().with_fuel(1001).check_within(&ceilings).is_err());
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
