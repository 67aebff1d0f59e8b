//! Interrupting a thread blocked in a system call. A wasm run makes its file operations on its
//! own thread (no hop to a blocking pool per call); a guest that blocks there (a read from a
//! FIFO, an `open` of one) is released at the deadline by a real-time signal whose handler does
//! nothing and which is installed without `SA_RESTART`, so that the call fails with `EINTR`,
//! the guest is back in wasm code, and the epoch deadline ends it.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The signal: a real-time one above those the C library reserves (glibc takes the first two
/// or three), which no default action or other user of wrun's process expects.
fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 6
}

extern "C" fn do_nothing(_: libc::c_int) {}

/// Installs the handler once for the process.
fn install() -> std::io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: `struct sigaction` is plain data for which all-zero bytes are a valid value
        // (no handler, no flags, an empty mask), filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = do_nothing as extern "C" fn(libc::c_int) as usize;
        // No SA_RESTART: a blocked call returns EINTR.
        action.sa_flags = 0;
        // SAFETY: `sigemptyset` writes the mask it is given, a field of a local.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installs a handler that does nothing (trivially async-signal-safe) for a
        // real-time signal nothing else of the process uses; the old action is not needed.
        if unsafe { libc::sigaction(signal(), &action, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(())
    });
    (*result).map_err(std::io::Error::from_raw_os_error)
}

/// Which thread to interrupt, and which run it is making (0: none).
#[derive(Debug)]
struct State {
    thread: Option<libc::pthread_t>,
    run: u64,
}

/// A handle that interrupts a blocking system call of one run on one thread, while the thread
/// is registered and making that run.
#[derive(Debug, Clone)]
pub(crate) struct Interrupter {
    state: Arc<Mutex<State>>,
}

/// Held by the thread that may be interrupted; dropping it (before the thread ends) makes
/// every [`Interrupter`] of it a no-op, so that a signal never reaches a later thread that
/// reuses the id.
#[derive(Debug)]
pub(crate) struct Registration {
    state: Arc<Mutex<State>>,
}

impl Registration {
    /// The thread starts making run `run` (not 0): [`Interrupter::interrupt`] of that run
    /// reaches it until [`Registration::end`].
    pub(crate) fn begin(&self, run: u64) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).run = run;
    }

    /// The thread is done with its run: no interrupt of it reaches the thread any more.
    pub(crate) fn end(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).run = 0;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.thread = None;
        state.run = 0;
    }
}

/// Registers the calling thread: its [`Registration`] (keep it while the thread lives) and
/// the [`Interrupter`] for others.
pub(crate) fn register_current_thread() -> std::io::Result<(Registration, Interrupter)> {
    install()?;
    // SAFETY: `pthread_self` has no preconditions and returns the calling thread's id.
    let me = unsafe { libc::pthread_self() };
    let state = Arc::new(Mutex::new(State {
        thread: Some(me),
        run: 0,
    }));
    Ok((Registration { state: state.clone() }, Interrupter { state }))
}

impl Interrupter {
    /// Interrupts the current blocking call of run `run`, if the thread is still registered
    /// and making it. Returns whether it was.
    pub(crate) fn interrupt(&self, run: u64) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(id) = state.thread.filter(|_| run != 0 && state.run == run) else {
            return false;
        };
        // SAFETY: `id` is a live thread: its `Registration` is dropped (under this lock)
        // before it ends, and this call is made under the same lock. The signal's handler does
        // nothing.
        unsafe { libc::pthread_kill(id, signal()) };
        true
    }
}
