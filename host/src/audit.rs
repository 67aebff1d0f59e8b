//! The audit log: one JSON line per run, appended to the file the policy names. It records what
//! ran, under which decisions and limits, and how it ended; never the value of an environment
//! variable (dropped variables appear by name and reason only) and never the helper's output.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use wrun_runtime::env::DroppedEnv;
use wrun_runtime::{Backend, Limits, Outcome, Status};

/// Where a helper's definition came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefinitionSource {
    /// The ref read (the base repository's default branch).
    pub git_ref: String,
    /// The commit it pointed at.
    pub commit: String,
}

/// One audit record.
#[derive(Debug, Clone, Serialize)]
pub struct Record<'a> {
    /// Seconds since the Unix epoch, with milliseconds.
    pub time: f64,
    /// The helper's name.
    pub helper: &'a str,
    /// Where its definition came from, when it came from a repository.
    pub definition: Option<&'a DefinitionSource>,
    /// The resolved command (native) or `sha256:<hex>` of the module (wasm).
    pub program: &'a str,
    /// Policy decisions: what was refused, dropped or clamped, one sentence each.
    pub decisions: &'a [String],
    /// The limits the run had (none for a request refused before it became a job).
    pub limits: Option<&'a Limits>,
    /// How it ended.
    pub status: &'a Status,
    /// Which backend and confinement (none for a request refused before it became a job).
    pub backend: Option<&'a Backend>,
    /// Wall time in milliseconds.
    pub wall_ms: u64,
    /// Bytes the helper wrote to stdout / kept.
    pub stdout_bytes: (u64, u64),
    /// Bytes the helper wrote to stderr / kept.
    pub stderr_bytes: (u64, u64),
    /// Records (findings) read from stdout / dropped past the findings limits.
    pub findings: (u64, u64),
    /// Environment variables dropped, by name and reason.
    pub env_dropped: &'a [DroppedEnv],
    /// What the helper created with a protected path's name, removed after the run.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub removed: &'a [String],
    /// For a refusal, the rule that refused it (`shell.operand`, `upstream.url` …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'a str>,
}

impl<'a> Record<'a> {
    /// A record for a finished run.
    pub fn new(
        helper: &'a str,
        definition: Option<&'a DefinitionSource>,
        program: &'a str,
        decisions: &'a [String],
        limits: &'a Limits,
        outcome: &'a Outcome,
    ) -> Self {
        Self {
            limits: Some(limits),
            backend: Some(&outcome.backend),
            ..Self::refused(helper, definition, program, decisions, outcome)
        }
    }

    /// A record for a request refused before it became a job: no limits, no backend.
    pub fn refused(
        helper: &'a str,
        definition: Option<&'a DefinitionSource>,
        program: &'a str,
        decisions: &'a [String],
        outcome: &'a Outcome,
    ) -> Self {
        let kept = |c: &wrun_runtime::Captured| (c.total_bytes, c.total_bytes - c.cut_bytes);
        Self {
            time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0),
            helper,
            definition,
            program,
            decisions,
            limits: None,
            status: &outcome.status,
            backend: None,
            wall_ms: u64::try_from(outcome.usage.wall_time.as_millis()).unwrap_or(u64::MAX),
            stdout_bytes: kept(&outcome.stdout),
            stderr_bytes: kept(&outcome.stderr),
            findings: (
                outcome.records.kept.len() as u64 + outcome.records.dropped,
                outcome.records.dropped,
            ),
            env_dropped: &outcome.env_dropped,
            removed: &outcome.removed,
            rule: None,
        }
    }

    /// A record for a request refused before it became a job, by `rule`: no limits, no
    /// backend, no output.
    pub fn refusal(
        helper: &'a str,
        definition: Option<&'a DefinitionSource>,
        decisions: &'a [String],
        status: &'a Status,
        rule: &'a str,
    ) -> Self {
        Self {
            time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0),
            helper,
            definition,
            program: "",
            decisions,
            limits: None,
            status,
            backend: None,
            wall_ms: 0,
            stdout_bytes: (0, 0),
            stderr_bytes: (0, 0),
            findings: (0, 0),
            env_dropped: &[],
            removed: &[],
            rule: Some(rule),
        }
    }

    /// The record as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"audit_error\":{:?}}}", e.to_string()));
        line.push('\n');
        line
    }
}

/// Opens the log at `path` for appending: created `0600` if missing (whatever the umask); an
/// existing log must be a regular file (not a symlink) owned by wrun's user that neither group
/// nor others may write, else it is refused: a log others can write can be forged.
///
/// # Security
/// Opens the operator's audit file with wrun's authority.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc_o_nofollow())
        .open(path)?;
    let meta = file.metadata()?;
    let refuse = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{why}; the audit log must be a file only wrun's user may write (chown it, chmod 600 it)"
            ),
        )
    };
    if !meta.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(refuse("another user owns it"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse("group or others may write it"));
    }
    // A log wrun just created has no read bits for others either, whatever the umask.
    if meta.len() == 0 && meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// `O_NOFOLLOW`: the log's own name may not be a symlink.
/// Opening never follows a link and never waits: a FIFO (or a device) named as the log opens
/// at once and is then refused as not a regular file, rather than blocking until a reader comes.
fn libc_o_nofollow() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

/// Appends `record` to the log at `path` (see [`open`]) in one write, so concurrent runs do not
/// interleave within a line.
///
/// # Security
/// Writes the operator's audit file with wrun's authority.
pub fn append(path: &Path, record: &Record<'_>) -> std::io::Result<()> {
    let mut file = open(path)?;
    file.write_all(record.to_line().as_bytes())
}

/// Appends one JSON value as a line to the log at `path` (see [`open`]), in one write: records
/// of events other than runs (`wrun install`).
///
/// # Security
/// Writes the operator's audit file with wrun's authority.
pub fn append_value(path: &Path, value: &serde_json::Value) -> std::io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    let mut file = open(path)?;
    file.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wrun_runtime::env::{EnvOrigin, EnvVar, guard};

    #[test]
    fn a_fifo_or_a_link_named_as_the_log_is_refused_at_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fifo = tmp.path().join("fifo");
        nix::unistd::mkfifo(
            &fifo,
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )
        .expect("mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(open(&path).map(|_| ()).map_err(|e| e.to_string()));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO as the audit log must not block");
        let err = result.expect_err("a FIFO is not a log");
        assert!(
            err.contains("regular file") || err.contains("No such device"),
            "{err}"
        );
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("link")).expect("symlink");
        assert!(open(&tmp.path().join("link")).is_err());
        // The must-run twin: a new log file is created 0600 and written.
        let log = tmp.path().join("audit.jsonl");
        open(&log).expect("a new log");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&log).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_record_names_dropped_variables_but_never_their_values() {
        let dropped = guard(&[EnvVar {
            name: "GITHUB_TOKEN".into(),
            value: "ghp_supersecretvalue".into(),
            origin: EnvOrigin::Job,
        }])
        .dropped;
        let outcome = Outcome {
            env_dropped: dropped,
            ..Outcome::refused(Backend::Wasm, "x", Vec::new())
        };
        let limits = Limits::default();
        let decisions = vec!["dropped env GITHUB_TOKEN (secret)".to_owned()];
        let source = DefinitionSource {
            git_ref: "refs/heads/main".into(),
            commit: "0123abcd".into(),
        };
        let record = Record::new(
            "secret-scan",
            Some(&source),
            "sha256:00",
            &decisions,
            &limits,
            &outcome,
        );
        let line = record.to_line();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert!(line.contains("GITHUB_TOKEN") && !line.contains("ghp_supersecretvalue"));
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("audit.jsonl");
        append(&log, &record).expect("append");
        append(&log, &record).expect("append");
        let text = std::fs::read_to_string(&log).expect("read");
        assert_eq!(text.lines().count(), 2);
        let v: serde_json::Value = serde_json::from_str(text.lines().next().expect("line")).expect("json");
        assert_eq!(v["definition"]["commit"], "0123abcd");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&log).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_log_others_may_write_or_a_symlink_is_refused_and_a_new_one_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = dir.path().join("shared.jsonl");
        std::fs::write(&shared, "").expect("write");
        for mode in [0o666, 0o620, 0o602] {
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let e = open(&shared).expect_err("refused");
            assert!(e.to_string().contains("may write it"), "{mode:o}: {e}");
        }
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        open(&shared).expect("a log only its owner may write is fine");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&shared, &link).expect("symlink");
        assert!(open(&link).is_err());
        // A new log is 0600 whatever the umask (here the default 022 makes a plain create 0644).
        let fresh = dir.path().join("fresh.jsonl");
        open(&fresh).expect("created");
        assert_eq!(
            std::fs::metadata(&fresh).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }
}
