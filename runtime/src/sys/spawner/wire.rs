//! What host and spawner say to each other.
//!
//! Command, host to spawner: one `SOCK_SEQPACKET` message (little endian) with the descriptors
//! in `SCM_RIGHTS`: `magic u32, argc u32, envc u32, nrlimits u32, flags u32`, then `nrlimits ×
//! (resource u32, soft u64, hard u64)`, then `2 + argc + envc` NUL-terminated strings: the
//! program, `argv`, the environment as `NAME=value`, the working directory. Descriptors: stdin,
//! stdout, stderr and optionally one more, which the program receives as fd 3 (the seccomp
//! program for bwrap). Events, spawner to host, 8 bytes each (`kind u32, value i32`):
//! [`Event::Started`] with the pid, then [`Event::Ended`] with the raw wait status; or
//! [`Event::Failed`] with the errno of the step that failed. End of file: the spawner is gone.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const MAGIC: u32 = 0x7772_756e; // "wrun"

/// The largest command message; a bigger one is refused before it is sent. It fits in a
/// socket's default send buffer, so sending never blocks.
pub(super) const MAX_MESSAGE: usize = 128 * 1024;

/// The most strings (argv plus environment) a command may carry.
pub(super) const MAX_STRINGS: usize = 8 * 1024;

/// Command flag: start the program with no capability in any set, securebits locked and
/// `no_new_privs` (an unsandboxed helper; bwrap drops them itself inside the sandbox).
pub(super) const DROP_PRIVILEGES: u32 = 1;

/// Command flag: the string after the working directory names a directory to mount `noexec`
/// (in a user and mount namespace of the program's own) before the program starts; the
/// strings after it, names of directories at its top that stay executable.
pub(super) const NO_EXEC: u32 = 2;

/// The most directories a non-executable mount keeps executable, on the wire.
pub(super) const MAX_EXEMPT: usize = 8;

/// A directory made non-executable, and the names beneath it that stay executable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoExec<'a> {
    /// The directory (a host path).
    pub(crate) dir: &'a Path,
    /// Names of directories at its top.
    pub(crate) except: &'a [String],
}

/// The length of a command's fixed header.
const HEADER: usize = 20;

/// The length of one rlimit entry.
const RLIMIT_LEN: usize = 20;

pub(super) const STARTED: u32 = 1;
pub(super) const FAILED: u32 = 2;
pub(super) const ENDED: u32 = 3;

/// One command for a spawner, encoded.
#[derive(Debug)]
pub(crate) struct Message(pub(super) Vec<u8>);

impl Message {
    /// Encodes `program` with `argv` (whose first entry is the program's name for itself), the
    /// environment, the working directory and `(resource, soft, hard)` rlimits (`libc::RLIMIT_*`).
    /// With `drop_privileges`, the program starts with no capabilities at all.
    pub(crate) fn new(
        program: &Path,
        argv: &[&OsStr],
        env: &[(String, String)],
        cwd: &Path,
        rlimits: &[(u32, u64, u64)],
        drop_privileges: bool,
        no_exec: Option<NoExec<'_>>,
    ) -> io::Result<Self> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        if argv.len() + env.len() + 2 > MAX_STRINGS {
            return Err(invalid("too many arguments and environment variables"));
        }
        if let Some(n) = &no_exec
            && (n.except.len() > MAX_EXEMPT || n.except.iter().any(|e| !exempt_name(e.as_bytes())))
        {
            return Err(invalid(
                "the directories kept executable must be at most 8 plain names",
            ));
        }
        let mut out = Vec::with_capacity(4096);
        let mut flags = if drop_privileges { DROP_PRIVILEGES } else { 0 };
        if no_exec.is_some() {
            flags |= NO_EXEC;
        }
        for n in [
            MAGIC,
            argv.len() as u32,
            env.len() as u32,
            rlimits.len() as u32,
            flags,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for &(resource, soft, hard) in rlimits {
            out.extend_from_slice(&resource.to_le_bytes());
            out.extend_from_slice(&soft.to_le_bytes());
            out.extend_from_slice(&hard.to_le_bytes());
        }
        let mut string = |bytes: &[u8], what: &str| {
            if bytes.contains(&0) {
                return Err(invalid(&format!("{what} contains a NUL byte")));
            }
            out.extend_from_slice(bytes);
            out.push(0);
            Ok(())
        };
        string(program.as_os_str().as_bytes(), "the program path")?;
        for arg in argv {
            string(arg.as_bytes(), "an argument")?;
        }
        for (name, value) in env {
            if name.contains('=') || name.is_empty() {
                return Err(invalid(&format!("invalid environment variable name {name:?}")));
            }
            string(format!("{name}={value}").as_bytes(), "an environment variable")?;
        }
        string(cwd.as_os_str().as_bytes(), "the working directory")?;
        if let Some(n) = no_exec {
            string(n.dir.as_os_str().as_bytes(), "the non-executable directory")?;
            for name in n.except {
                string(name.as_bytes(), "a directory kept executable")?;
            }
        }
        if out.len() > MAX_MESSAGE {
            return Err(invalid("the command line and environment are too large"));
        }
        Ok(Self(out))
    }
}

/// What a spawner reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The program was started with this pid (also its process group).
    Started(i32),
    /// Starting the program failed with this errno; the spawner is parked again.
    Failed(i32),
    /// The program ended with this raw wait status; the spawner is parked again.
    Ended(i32),
}

impl Event {
    /// Decodes one event message.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let kind = u32_at(bytes, 0)?;
        let value = u32_at(bytes, 4)? as i32;
        if bytes.len() != 8 {
            return None;
        }
        match kind {
            STARTED => Some(Self::Started(value)),
            FAILED => Some(Self::Failed(value)),
            ENDED => Some(Self::Ended(value)),
            _ => None,
        }
    }

    /// Encodes an event (in the spawner: no allocation).
    pub(super) fn encode(kind: u32, value: i32) -> [u8; 8] {
        let mut bytes = [0u8; 8];
        let (k, v) = bytes.split_at_mut(4);
        k.copy_from_slice(&kind.to_le_bytes());
        v.copy_from_slice(&value.to_le_bytes());
        bytes
    }
}

/// A received command: the strings point into the message buffer, `argv` and `envp` into the
/// pointer table `parse` filled.
pub(super) struct Received<'a> {
    pub(super) flags: u32,
    rlimits: &'a [u8],
    pub(super) program: &'a CStr,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) cwd: &'a CStr,
    /// With [`NO_EXEC`]: the directory to make non-executable.
    pub(super) no_exec: Option<&'a CStr>,
    /// With [`NO_EXEC`]: the names kept executable, NUL-terminated one after another.
    exempt: &'a [u8],
}

/// Whether `name` may be kept executable: one plain name.
fn exempt_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl<'a> Received<'a> {
    /// The names kept executable beneath [`Received::no_exec`].
    pub(super) fn exempt(&self) -> impl Iterator<Item = &'a CStr> + 'a {
        let mut rest = self.exempt;
        std::iter::from_fn(move || {
            let s = CStr::from_bytes_until_nul(rest).ok()?;
            rest = rest.get(s.to_bytes_with_nul().len()..)?;
            Some(s)
        })
    }

    /// The `(resource, soft, hard)` rlimits of the command.
    pub(super) fn rlimits(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.rlimits.chunks_exact(RLIMIT_LEN).filter_map(|c| {
            Some((
                u32::from_le_bytes(c.get(0..4)?.try_into().ok()?),
                u64::from_le_bytes(c.get(4..12)?.try_into().ok()?),
                u64::from_le_bytes(c.get(12..20)?.try_into().ok()?),
            ))
        })
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Checks a message and fills `table`: `argv`, NULL, environment, NULL. `None` if the message
/// is malformed. Allocation-free and panic-free (for the child after fork).
pub(super) fn parse<'a>(message: &'a [u8], table: &'a mut [*const libc::c_char]) -> Option<Received<'a>> {
    if u32_at(message, 0)? != MAGIC {
        return None;
    }
    let argc = u32_at(message, 4)? as usize;
    let envc = u32_at(message, 8)? as usize;
    let nrlimits = u32_at(message, 12)? as usize;
    let flags = u32_at(message, 16)?;
    if flags & !(DROP_PRIVILEGES | NO_EXEC) != 0 {
        return None;
    }
    let rlimits_end = nrlimits.checked_mul(RLIMIT_LEN)?.checked_add(HEADER)?;
    let rlimits = message.get(HEADER..rlimits_end)?;
    // argv, NULL, env, NULL.
    let slots = argc.checked_add(envc)?.checked_add(2)?;
    if slots > table.len() || argc == 0 {
        return None;
    }
    let mut at = rlimits_end;
    let next = |at: &mut usize| -> Option<&'a CStr> {
        let s = CStr::from_bytes_until_nul(message.get(*at..)?).ok()?;
        *at = at.checked_add(s.to_bytes_with_nul().len())?;
        Some(s)
    };
    let program = next(&mut at)?;
    for slot in table.get_mut(..argc)? {
        *slot = next(&mut at)?.as_ptr();
    }
    *table.get_mut(argc)? = std::ptr::null();
    for slot in table.get_mut(argc + 1..argc + 1 + envc)? {
        *slot = next(&mut at)?.as_ptr();
    }
    *table.get_mut(argc + 1 + envc)? = std::ptr::null();
    let cwd = next(&mut at)?;
    let (no_exec, exempt) = if flags & NO_EXEC != 0 {
        let dir = next(&mut at)?;
        if dir.to_bytes().first() != Some(&b'/') {
            return None;
        }
        let start = at;
        let mut count = 0;
        while at < message.len() {
            if !exempt_name(next(&mut at)?.to_bytes()) {
                return None;
            }
            count += 1;
        }
        if count > MAX_EXEMPT {
            return None;
        }
        (Some(dir), message.get(start..)?)
    } else {
        (None, &[][..])
    };
    if at != message.len() {
        return None;
    }
    Some(Received {
        flags,
        rlimits,
        program,
        argv: table.as_ptr(),
        // In bounds: `argc + 1 < slots <= table.len()`, checked above.
        envp: table.get(argc + 1..)?.as_ptr(),
        cwd,
        no_exec,
        exempt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_what_new_writes_and_refuses_what_it_did_not() {
        let argv = [OsStr::new("/bin/echo"), OsStr::new("a b"), OsStr::new("")];
        let env = vec![("PATH".to_owned(), "/usr/bin".to_owned())];
        let message = Message::new(
            Path::new("/bin/echo"),
            &argv,
            &env,
            Path::new("/tmp"),
            &[(libc::RLIMIT_CORE, 0, 0), (libc::RLIMIT_NOFILE, 64, 128)],
            true,
            None,
        )
        .expect("valid");
        let mut table = vec![std::ptr::null(); 16];
        let received = parse(&message.0, &mut table).expect("valid");
        assert_eq!(received.flags, DROP_PRIVILEGES);
        assert_eq!(received.program.to_bytes(), b"/bin/echo");
        assert_eq!(received.cwd.to_bytes(), b"/tmp");
        assert_eq!(
            received.rlimits().collect::<Vec<_>>(),
            vec![(libc::RLIMIT_CORE, 0, 0), (libc::RLIMIT_NOFILE, 64, 128)]
        );
        let envp = received.envp;
        let text = |p: *const libc::c_char| {
            // SAFETY: the non-null table entries point into `message`, NUL-terminated.
            unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
        };
        assert_eq!(envp, table[4..].as_ptr());
        assert_eq!(text(table[1]), b"a b");
        assert_eq!(text(table[2]), b"");
        assert!(table[3].is_null());
        assert_eq!(text(table[4]), b"PATH=/usr/bin");
        assert!(table[5].is_null());

        // Every truncation, a wrong magic and trailing bytes are refused, never a panic.
        for cut in 0..message.0.len() {
            assert!(parse(&message.0[..cut], &mut table).is_none(), "cut at {cut}");
        }
        let mut extra = message.0.clone();
        extra.push(b'x');
        assert!(parse(&extra, &mut table).is_none());
        let mut magic = message.0.clone();
        magic[0] ^= 1;
        assert!(parse(&magic, &mut table).is_none());
        let mut flags = message.0.clone();
        flags[16] |= 4;
        assert!(parse(&flags, &mut table).is_none(), "an unknown flag");
        // More strings than the table holds.
        let mut small = vec![std::ptr::null(); 4];
        assert!(parse(&message.0, &mut small).is_none());
    }

    #[test]
    fn new_refuses_nul_bytes_and_bad_names() {
        let nul = OsStr::from_bytes(b"a\0b");
        assert!(
            Message::new(
                Path::new("/bin/true"),
                &[nul],
                &[],
                Path::new("/"),
                &[],
                false,
                None
            )
            .is_err()
        );
        for bad in [
            &["a/b".to_owned()][..],
            &["..".to_owned()],
            &[String::new()],
            &vec!["a".to_owned(); 9],
        ] {
            let no_exec = NoExec {
                dir: Path::new("/w"),
                except: bad,
            };
            assert!(
                Message::new(
                    Path::new("/bin/true"),
                    &[OsStr::new("t")],
                    &[],
                    Path::new("/"),
                    &[],
                    false,
                    Some(no_exec)
                )
                .is_err(),
                "{bad:?}"
            );
        }
        let env = vec![("A=B".to_owned(), "x".to_owned())];
        assert!(
            Message::new(
                Path::new("/bin/true"),
                &[OsStr::new("t")],
                &env,
                Path::new("/"),
                &[],
                false,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn a_non_executable_directory_and_its_exemptions_round_trip() {
        let except = vec![".ai".to_owned(), "tools".to_owned()];
        let message = Message::new(
            Path::new("/bin/true"),
            &[OsStr::new("true")],
            &[],
            Path::new("/"),
            &[],
            false,
            Some(NoExec {
                dir: Path::new("/work/tree"),
                except: &except,
            }),
        )
        .expect("valid");
        let mut table = vec![std::ptr::null(); 4];
        let received = parse(&message.0, &mut table).expect("valid");
        assert_eq!(received.flags, NO_EXEC);
        assert_eq!(received.no_exec.map(CStr::to_bytes), Some(&b"/work/tree"[..]));
        let names: Vec<&[u8]> = received.exempt().map(CStr::to_bytes).collect();
        assert_eq!(names, vec![&b".ai"[..], b"tools"]);
        for cut in 0..message.0.len() {
            let _ = parse(&message.0[..cut], &mut table);
        }
        // A relative directory or an exemption with a slash is refused.
        let mut relative = message.0.clone();
        let at = relative
            .windows(10)
            .position(|w| w == b"/work/tree")
            .expect("dir");
        relative[at] = b'w';
        assert!(parse(&relative, &mut table).is_none());
        let mut slash = message.0.clone();
        let at = slash.windows(5).position(|w| w == b"tools").expect("name");
        slash[at + 1] = b'/';
        assert!(parse(&slash, &mut table).is_none());
    }

    #[test]
    fn events_round_trip_and_garbage_is_refused() {
        for (kind, event) in [
            (STARTED, Event::Started(42)),
            (FAILED, Event::Failed(2)),
            (ENDED, Event::Ended(-1)),
        ] {
            let value = match event {
                Event::Started(v) | Event::Failed(v) | Event::Ended(v) => v,
            };
            assert_eq!(Event::decode(&Event::encode(kind, value)), Some(event));
        }
        assert_eq!(Event::decode(&[1, 0, 0, 0]), None);
        assert_eq!(Event::decode(&[9, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(Event::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    }
}
