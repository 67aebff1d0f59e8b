//! Compiled-code caches: in memory (as `InstancePre`, per engine) and on disk.
//!
//! Disk entries live in `<dir>/<engine hash>/<module sha256>.cwasm`. The engine hash covers
//! wasmtime's compatibility hash of the engine configuration, so a fuel engine never loads
//! code compiled without fuel checks. Each file is `MAGIC`, the SHA-256 of the payload, then
//! the payload; files are written to a temporary name and renamed, in directories created
//! `0700`. An entry is loaded only if the directory and file belong to the current user and
//! nobody else may write them, and the digest matches; anything else is ignored and the module
//! recompiled (and the entry rewritten). The cache never decides whether a module may run.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::{Engine, InstancePre, Module};

use crate::Error;
use crate::job::hex;

const MAGIC: &[u8; 8] = b"WRUNC\x00\x01\x00";

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
        let digest = hasher.0.finalize();
        let dir = root.join(&hex(&digest)[..32]);
        ensure_private_dir(&dir)?;
        Ok(Self { dir })
    }

    fn path(&self, sha256: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.cwasm", hex(sha256)))
    }

    /// Loads the entry for `sha256`, or `None` if it is missing or not trustworthy.
    pub(crate) fn load(&self, engine: &Engine, sha256: &[u8; 32]) -> Option<Module> {
        let path = self.path(sha256);
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .ok()?;
        let meta = file.metadata().ok()?;
        let me = nix::unistd::geteuid().as_raw();
        if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 || meta.len() > MAX_ENTRY {
            return None;
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_ENTRY).read_to_end(&mut data).ok()?;
        let payload = verify(&data)?;
        crate::sys::deserialize_module(engine, payload).ok()
    }

    /// Stores compiled code for `sha256`. Failures are ignored: the cache only saves time.
    pub(crate) fn store(&self, sha256: &[u8; 32], compiled: &[u8]) {
        let _ = self.try_store(sha256, compiled);
    }

    fn try_store(&self, sha256: &[u8; 32], compiled: &[u8]) -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .permissions(fs::Permissions::from_mode(0o600))
            .tempfile_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&Sha256::digest(compiled))?;
        tmp.write_all(compiled)?;
        tmp.as_file().sync_data()?;
        tmp.persist(self.path(sha256)).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Checks the header and digest of a cache file and returns its payload.
fn verify(data: &[u8]) -> Option<&[u8]> {
    let rest = data.strip_prefix(MAGIC)?;
    if rest.len() < 32 {
        return None;
    }
    let (digest, payload) = rest.split_at(32);
    (Sha256::digest(payload).as_slice() == digest).then_some(payload)
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

/// Prepared modules by content digest, least recently inserted evicted first.
pub(crate) struct MemoryCache<T: 'static> {
    inner: Mutex<Entries<T>>,
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
        }
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
    fn verify_rejects_tampering() {
        let payload = b"compiled code";
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&Sha256::digest(payload));
        file.extend_from_slice(payload);
        assert_eq!(verify(&file), Some(&payload[..]));
        let mut flipped = file.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(verify(&flipped), None);
        assert_eq!(verify(&file[..20]), None);
        assert_eq!(verify(b"garbage"), None);
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
