//! Compiled-code caches: in memory (as `InstancePre`, per engine) and on disk, and an index
//! from module files' identities to their digests, so that a warm run neither reads nor
//! hashes its module.
//!
//! Disk entries live in `<dir>/<engine hash>/<module sha256>.cwasm`, each exactly what
//! `Module::serialize` wrote, mapped (not read) when loaded. The engine hash covers wasmtime's
//! compatibility hash of the engine configuration and this cache's format, so a fuel engine
//! never loads code compiled without fuel checks. Files are written to a temporary name and
//! renamed, in directories created `0700`; an entry is loaded only if the directory and file
//! belong to the current user and nobody else may write them (wasmtime checks the header and
//! the engine configuration again). Anything else is ignored and the module recompiled. The
//! cache never decides whether a module may run.
//!
//! The file index (`<dir>/<engine hash>/files/<inode key>`) records, for a module file's
//! [`FileId`] (device, inode, size, modification and change times), the digest its content
//! had and when that was recorded. An entry recorded within [`RACY`] of the file's last change
//! is not trusted (git's rule for racily clean entries: a change in the same timestamp tick
//! leaves the times as they were); the module is then read and hashed, and the entry
//! recorded again.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::{Engine, InstancePre, Module};

use crate::Error;
use crate::job::{FileId, hex};

/// What the engine hash also covers: the format of the files below it.
const FORMAT: &[u8] = b"wrun cache format 2: raw serialized modules, file index";

/// How close to a file's last change an identity may have been recorded and not be trusted:
/// more than any file system's timestamp granularity (coarse clocks tick every few ms; some
/// file systems keep whole seconds).
pub(crate) const RACY: i128 = 2_000_000_000;

/// Bytes of a file index entry: dev, ino, size (u64 each), mtime, ctime, recorded (i128
/// each), digest.
const INDEX_ENTRY: usize = 3 * 8 + 3 * 16 + 32;

/// Largest compiled file the cache reads back. Compiled code is a few times the module size,
/// and modules are capped well below this.
const MAX_ENTRY: u64 = 2 << 30;

/// A disk cache for one engine configuration.
#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
}

/// Creates `dir` (mode 0700) if needed and checks that only the current user can write it.
///
/// # Security
/// Creates and inspects a host directory chosen by the caller.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<(), Error> {
    let err = |reason: String| Error::Cache {
        path: dir.to_owned(),
        reason,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| err(format!("cannot create it: {e}")))?;
    let meta = fs::symlink_metadata(dir).map_err(|e| err(format!("cannot inspect it: {e}")))?;
    if !meta.is_dir() {
        return Err(err("it is not a directory (a symlink is not accepted)".into()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(err(format!(
            "it belongs to uid {}, not to the current user {me}; use a directory of your own",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(err(format!(
            "others may write it (mode {:o}); run `chmod go-w` on it or pick another directory",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

impl DiskCache {
    /// A cache for `engine` under `root`, which the caller has checked with
    /// [`ensure_private_dir`].
    pub(crate) fn new(root: &Path, engine: &Engine) -> Result<Self, Error> {
        let mut hasher = Sha256Hasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        hasher.0.update(FORMAT);
        let digest = hasher.0.finalize();
        let dir = root.join(&hex(&digest)[..32]);
        ensure_private_dir(&dir)?;
        ensure_private_dir(&dir.join("files"))?;
        Ok(Self { dir })
    }

    fn path(&self, sha256: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.cwasm", hex(sha256)))
    }

    /// Opens a file of the cache for reading if it is one of ours: a regular file (not a
    /// link) of the current user that nobody else may write, at most `max` bytes.
    fn open_own(path: &Path, max: u64) -> Option<fs::File> {
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        let me = nix::unistd::geteuid().as_raw();
        (meta.is_file() && meta.uid() == me && meta.mode() & 0o022 == 0 && meta.len() <= max).then_some(file)
    }

    /// Loads the entry for `sha256`, mapping it, or `None` if it is missing or not ours.
    pub(crate) fn load(&self, engine: &Engine, sha256: &[u8; 32]) -> Option<Module> {
        let file = Self::open_own(&self.path(sha256), MAX_ENTRY)?;
        crate::sys::deserialize_module_file(engine, file).ok()
    }

    /// Stores compiled code for `sha256`. Failures are ignored: the cache only saves time.
    pub(crate) fn store(&self, sha256: &[u8; 32], compiled: &[u8]) {
        let _ = self.write(&self.path(sha256), compiled);
    }

    fn write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .permissions(fs::Permissions::from_mode(0o600))
            .tempfile_in(&self.dir)?;
        tmp.write_all(data)?;
        tmp.as_file().sync_data()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    fn index_path(&self, id: &FileId) -> PathBuf {
        let mut key = Sha256::new();
        key.update(id.dev.to_le_bytes());
        key.update(id.ino.to_le_bytes());
        self.dir.join("files").join(&hex(&key.finalize())[..32])
    }

    /// The digest recorded for the file `id` names, if the entry is for exactly that identity
    /// and was recorded well after the file's last change.
    pub(crate) fn digest_of(&self, id: &FileId) -> Option<[u8; 32]> {
        let mut file = Self::open_own(&self.index_path(id), INDEX_ENTRY as u64)?;
        let mut data = [0u8; INDEX_ENTRY];
        file.read_exact(&mut data).ok()?;
        let (recorded, digest) = decode(&data, id)?;
        (recorded > id.changed_ns() + RACY).then_some(digest)
    }

    /// Records that the file `id` names held content with digest `sha256`, now.
    pub(crate) fn record(&self, id: &FileId, sha256: &[u8; 32]) {
        let _ = self.write(&self.index_path(id), &encode(id, now_ns(), sha256));
    }
}

/// The wall clock in nanoseconds since the epoch.
pub(crate) fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

fn encode(id: &FileId, recorded: i128, sha256: &[u8; 32]) -> [u8; INDEX_ENTRY] {
    let mut out = [0u8; INDEX_ENTRY];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&id.dev.to_le_bytes());
    put(&id.ino.to_le_bytes());
    put(&id.size.to_le_bytes());
    put(&id.mtime_ns.to_le_bytes());
    put(&id.ctime_ns.to_le_bytes());
    put(&recorded.to_le_bytes());
    put(sha256);
    out
}

/// The recorded time and digest of an entry, if it is for exactly `id`.
fn decode(data: &[u8; INDEX_ENTRY], id: &FileId) -> Option<(i128, [u8; 32])> {
    const ID: usize = 3 * 8 + 2 * 16;
    let expected = encode(id, 0, &[0; 32]);
    if data[..ID] != expected[..ID] {
        return None;
    }
    let recorded = i128::from_le_bytes(data[ID..ID + 16].try_into().ok()?);
    let digest = data[ID + 16..].try_into().ok()?;
    Some((recorded, digest))
}

/// Feeds `Hash` output into SHA-256, so the engine hash is stable across processes.
struct Sha256Hasher(Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Number of prepared modules kept per engine. A review host runs a few dozen helpers; the
/// bound keeps a host that runs many distinct modules from growing without end.
const MEMORY_ENTRIES: usize = 128;

/// Prepared modules by content digest, least recently inserted evicted first, and the digests
/// of module files by identity (with when they were recorded, as on disk).
pub(crate) struct MemoryCache<T: 'static> {
    inner: Mutex<Entries<T>>,
    files: Mutex<HashMap<FileId, ([u8; 32], i128)>>,
}

/// The prepared modules and their insertion order.
type Entries<T> = (HashMap<[u8; 32], InstancePre<T>>, VecDeque<[u8; 32]>);

impl<T> std::fmt::Debug for MemoryCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCache").finish_non_exhaustive()
    }
}

impl<T> MemoryCache<T> {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
            files: Mutex::new(HashMap::new()),
        }
    }

    /// The digest recorded for `id`, if recorded well after the file's last change.
    pub(crate) fn digest_of(&self, id: &FileId) -> Option<[u8; 32]> {
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files
            .get(id)
            .filter(|(_, recorded)| *recorded > id.changed_ns() + RACY)
            .map(|(digest, _)| *digest)
    }

    /// Records the digest of the file `id` names, now.
    pub(crate) fn record(&self, id: FileId, sha256: [u8; 32]) {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if files.len() >= 4 * MEMORY_ENTRIES {
            files.clear();
        }
        files.insert(id, (sha256, now_ns()));
    }

    pub(crate) fn get(&self, key: &[u8; 32]) -> Option<InstancePre<T>> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        guard.0.get(key).cloned()
    }

    pub(crate) fn insert(&self, key: [u8; 32], pre: InstancePre<T>) {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (map, order) = &mut *guard;
        if map.insert(key, pre).is_none() {
            order.push_back(key);
        }
        while order.len() > MEMORY_ENTRIES {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_entry_names_one_identity_and_a_racy_one_is_not_trusted() {
        let id = FileId {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4_000_000_000,
            ctime_ns: 5_000_000_000,
        };
        let entry = encode(&id, 9_000_000_000, &[7; 32]);
        assert_eq!(decode(&entry, &id), Some((9_000_000_000, [7; 32])));
        for other in [
            FileId { size: 4, ..id },
            FileId {
                ctime_ns: 5_000_000_001,
                ..id
            },
            FileId { ino: 3, ..id },
        ] {
            assert_eq!(decode(&entry, &other), None);
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let engine = Engine::default();
        let cache = DiskCache::new(tmp.path(), &engine).expect("cache");
        cache.record(&id, &[7; 32]);
        assert_eq!(
            cache.digest_of(&id),
            Some([7; 32]),
            "recorded long after the change"
        );
        let fresh = FileId {
            ctime_ns: now_ns(),
            ..id
        };
        cache.record(&fresh, &[8; 32]);
        assert_eq!(
            cache.digest_of(&fresh),
            None,
            "recorded in the tick of the change"
        );
    }

    #[test]
    fn group_writable_cache_dirs_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("cache");
        ensure_private_dir(&dir).expect("fresh dir is private");
        assert_eq!(fs::metadata(&dir).expect("meta").mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(matches!(ensure_private_dir(&dir), Err(Error::Cache { .. })));
    }
}
