//! Spawners made ahead of time and reused, so that a run pays neither for forking the host nor
//! for making and joining cgroups (see [`crate::sys::spawner`]).
//!
//! One thread per [`NativeSandbox`](super::NativeSandbox), started by its first run, keeps
//! [`READY`] spawners parked, each in its own pids (and memory) cgroup, and finishes off the
//! spawners runs leave behind. A run leases a parked spawner; when none is parked (many runs at
//! once) it waits for the thread to make one, which costs what starting a process used to cost
//! on the run's path.
//!
//! A spawner goes back to the pool after a sandboxed run that ended normally: by then every
//! process of the run has been killed (its cgroup is empty but for the spawner), the sandbox's
//! `/tmp` went with its mount namespace, the peak memory figure is reset, and nothing inside
//! bubblewrap can reach the spawner (another pid namespace, no `ptrace`). After an unsandboxed
//! run (whose helper could have tampered with it, or left files in the host's `/dev/shm`
//! charged to its cgroup), after a timeout or when the run's future was dropped, the spawner is
//! killed and its cgroups removed instead.
//!
//! Spawners die with the pool's thread (`PR_SET_PDEATHSIG`), and a run's process dies with its
//! spawner; the thread ends when the sandbox is dropped, so nothing outlives it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::cgroup::Cgroup;
use crate::sys::spawner::{self, Event, Message};

/// How many spawners the pool keeps parked ahead of demand.
const READY: usize = 2;

/// How many idle spawners the pool keeps at most (after a burst of concurrent runs).
const MAX_IDLE: usize = 8;

/// The limits a spawner's cgroups hold: `(max processes of a run, memory bytes)`.
type CgroupLimits = (u32, u64);

#[derive(Debug, Default)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    idle: VecDeque<Spawner>,
    waiters: VecDeque<oneshot::Sender<io::Result<Handed>>>,
    /// The limits of the latest request: new spawners are made with them.
    limits: Option<CgroupLimits>,
    /// Spawners to kill and whose cgroups to remove.
    retired: Vec<Spawner>,
    /// Spawners out on lease: they come back, so they count towards [`READY`].
    leased: usize,
    /// Making one failed; do not retry until the next request.
    refill_failed: bool,
    closed: bool,
}

/// A spawner with its cgroups.
#[derive(Debug)]
struct Spawner {
    pid: Pid,
    control: OwnedFd,
    cgroup: Option<Cgroup>,
    limits: CgroupLimits,
    /// The memory cgroup's OOM-kill count after the previous run.
    oom_kills: u64,
}

/// A spawner on its way to a waiter: counted as leased from the moment it is sent, so if the
/// waiter is gone before taking it (its run was dropped), it is retired and uncounted.
#[derive(Debug)]
struct Handed {
    spawner: Option<Spawner>,
    shared: Arc<Shared>,
}

impl Drop for Handed {
    fn drop(&mut self) {
        if let Some(spawner) = self.spawner.take() {
            self.shared.retire(spawner);
        }
    }
}

/// A spawner leased to one run. Dropped, it goes back to the pool if its run ended and may be
/// reused; otherwise everything in its cgroup is killed and it is retired.
#[derive(Debug)]
pub(crate) struct Lease<'p> {
    pool: &'p Pool,
    spawner: Option<Spawner>,
    events: Option<AsyncFd<OwnedFd>>,
    /// The program's pid (its process group), once started.
    child: Option<Pid>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Parked: nothing sent, or the start failed.
    Parked,
    Running,
    /// The program ended and its spawner is parked again.
    Ended,
    /// The spawner is in an unknown state (gone, or a timeout): it is retired.
    Broken,
}

impl Pool {
    /// Leases a spawner whose cgroups hold at most `max_processes` processes of the run and
    /// `memory` bytes.
    pub(crate) async fn lease(&self, max_processes: u32, memory: u64) -> io::Result<Lease<'_>> {
        self.start_thread()?;
        let limits = (max_processes, memory);
        let (parked, refill) = {
            let mut state = self.shared.lock();
            state.limits = Some(limits);
            state.refill_failed = false;
            let parked = state.idle.pop_front();
            state.leased += usize::from(parked.is_some());
            (parked, state.idle.len() + state.leased < READY)
        };
        if refill {
            self.shared.wake.notify_one();
        }
        if let Some(spawner) = parked {
            match self.limited(spawner, limits) {
                Ok(spawner) => return Ok(self.leased(spawner)),
                // A cgroup that cannot take the new limits (memory still charged above a
                // lower limit): a fresh spawner can.
                Err(failed) => self.shared.retire(failed.0),
            }
        }
        let (tx, rx) = oneshot::channel();
        self.shared.lock().waiters.push_back(tx);
        self.shared.wake.notify_one();
        let spawner = rx
            .await
            .map_err(|_| io::Error::other("the spawner thread has stopped"))??
            .spawner
            .take()
            .ok_or_else(gone)?;
        match self.limited(spawner, limits) {
            Ok(spawner) => Ok(self.leased(spawner)),
            Err(failed) => {
                let (spawner, cause) = *failed;
                let path = spawner.cgroup.as_ref().map(Cgroup::describe_dir);
                self.shared.retire(spawner);
                Err(io::Error::new(
                    cause.kind(),
                    format!(
                        "cannot set the run's limits in its cgroup {}: {cause}",
                        path.unwrap_or_default()
                    ),
                ))
            }
        }
    }

    /// `spawner` with its cgroups holding `limits`, or back with the reason if they cannot.
    fn limited(
        &self,
        mut spawner: Spawner,
        limits: CgroupLimits,
    ) -> Result<Spawner, Box<(Spawner, io::Error)>> {
        if spawner.limits == limits {
            return Ok(spawner);
        }
        let result = spawner
            .cgroup
            .as_ref()
            .map_or(Ok(()), |cg| cg.set_limits(limits.0.saturating_add(1), limits.1));
        spawner.limits = limits;
        match result {
            Ok(()) => Ok(spawner),
            Err(cause) => Err(Box::new((spawner, cause))),
        }
    }

    fn leased(&self, spawner: Spawner) -> Lease<'_> {
        Lease {
            pool: self,
            spawner: Some(spawner),
            events: None,
            child: None,
            phase: Phase::Parked,
        }
    }

    /// Starts the pool's thread, or starts it again if it ended (a panic): waiters queued for
    /// it are then served by the new one rather than waiting forever.
    fn start_thread(&self) -> io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.as_ref().is_none_or(std::thread::JoinHandle::is_finished) {
            if thread.is_some() {
                // Its parked spawners died with it (parent-death signal).
                let mut state = self.shared.lock();
                let idle = std::mem::take(&mut state.idle);
                state.retired.extend(idle);
            }
            let shared = Arc::clone(&self.shared);
            *thread = Some(
                std::thread::Builder::new()
                    .name("wrun-spawner".into())
                    .spawn(move || shared.serve())?,
            );
        }
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        let thread = self.thread.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change to the state is one push or pop, so a lock poisoned by a panic
        // elsewhere still guards a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A spawner back from a run: to a waiter, parked, or retired when enough are parked.
    fn give_back(self: &Arc<Self>, spawner: Spawner) {
        let mut state = self.lock();
        state.leased = state.leased.saturating_sub(1);
        let Some(spawner) = state.hand_to_waiter(spawner, self) else {
            return;
        };
        if state.idle.len() < MAX_IDLE && !state.closed {
            state.idle.push_back(spawner);
        } else {
            state.retired.push(spawner);
            drop(state);
            self.wake.notify_one();
        }
    }

    /// A leased spawner not to be reused.
    fn retire(&self, spawner: Spawner) {
        let mut state = self.lock();
        state.leased = state.leased.saturating_sub(1);
        state.retired.push(spawner);
        drop(state);
        self.wake.notify_one();
    }

    /// The pool's thread: make spawners for waiters, finish off retired ones, keep
    /// [`READY`] parked.
    fn serve(self: Arc<Self>) {
        enum Work {
            Make(CgroupLimits, bool),
            Retire(Vec<Spawner>),
        }
        loop {
            let work = {
                let mut state = self.lock();
                loop {
                    if state.closed {
                        let idle = std::mem::take(&mut state.idle);
                        let retired = std::mem::take(&mut state.retired);
                        drop(state);
                        drop((idle, retired));
                        return;
                    }
                    state.waiters.retain(|w| !w.is_closed());
                    let limits = state.limits;
                    match limits {
                        Some(limits) if !state.waiters.is_empty() => break Work::Make(limits, true),
                        _ if !state.retired.is_empty() => {
                            break Work::Retire(std::mem::take(&mut state.retired));
                        }
                        Some(limits) if state.idle.len() + state.leased < READY && !state.refill_failed => {
                            break Work::Make(limits, false);
                        }
                        _ => state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
                    }
                }
            };
            match work {
                Work::Retire(spawners) => drop(spawners),
                Work::Make(limits, for_waiter) => {
                    let made = Spawner::make(limits);
                    let mut state = self.lock();
                    match made {
                        Ok(spawner) => {
                            if let Some(spawner) = state.hand_to_waiter(spawner, &self) {
                                state.idle.push_back(spawner);
                            }
                        }
                        Err(e) if for_waiter => {
                            if let Some(waiter) = state.waiters.pop_front() {
                                let _ = waiter.send(Err(e));
                            }
                        }
                        Err(_) => state.refill_failed = true,
                    }
                }
            }
        }
    }
}

impl State {
    /// Gives `spawner` to the first waiter still waiting; returns it if there is none.
    fn hand_to_waiter(&mut self, spawner: Spawner, shared: &Arc<Shared>) -> Option<Spawner> {
        let mut handed = Handed {
            spawner: Some(spawner),
            shared: Arc::clone(shared),
        };
        while let Some(waiter) = self.waiters.pop_front() {
            self.leased += 1;
            match waiter.send(Ok(handed)) {
                Ok(()) => return None,
                // That waiter gave up: try the next.
                Err(back) => {
                    self.leased -= 1;
                    handed = back.ok()?;
                }
            }
        }
        // Taken out, so that dropping the empty guard does not retire it.
        handed.spawner.take()
    }
}

impl Spawner {
    /// Forks a spawner into fresh cgroups (where the machine allows them).
    fn make((max_processes, memory): CgroupLimits) -> io::Result<Self> {
        // The spawner itself counts against `pids.max`.
        let mut cgroup = Cgroup::create(max_processes.saturating_add(1), memory);
        let forked = spawner::fork()?;
        if let Some(cg) = &cgroup
            && cg.join(forked.pid.as_raw()).is_err()
        {
            // Without its cgroups the run falls back to rlimits and says so in its Outcome.
            cgroup = None;
        }
        let oom_kills = cgroup.as_ref().map_or(0, Cgroup::oom_kills);
        Ok(Self {
            pid: forked.pid,
            control: forked.control,
            cgroup,
            limits: (max_processes, memory),
            oom_kills,
        })
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        // It exits when its socket closes; SIGKILL makes sure (its child, if any, dies with
        // it), then reap it. Its cgroups are removed after (field drop).
        let _ = kill(self.pid, Signal::SIGKILL);
        let _ = waitpid(self.pid, None);
    }
}

impl Lease<'_> {
    /// The run's cgroups, if it has them.
    pub(crate) fn cgroup(&self) -> Option<&Cgroup> {
        self.spawner.as_ref().and_then(|s| s.cgroup.as_ref())
    }

    /// Sends the command; `fds` become the program's 0, 1, 2 (and 3). Within a tokio runtime.
    pub(crate) fn start(&mut self, message: &Message, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let spawner = self.spawner.as_ref().ok_or_else(gone)?;
        let events = crate::sys::watch_fd(spawner.control.try_clone()?)?;
        if let Err(e) = spawner::send(&spawner.control, message, fds) {
            // Gone, or in a state nobody knows: not to be reused.
            self.phase = Phase::Broken;
            return Err(e);
        }
        self.events = Some(events);
        self.phase = Phase::Running;
        Ok(())
    }

    /// Waits for the program to end; an error if it could not be started.
    pub(crate) async fn wait(&mut self) -> io::Result<WaitStatus> {
        let events = self.events.as_ref().ok_or_else(gone)?;
        loop {
            let mut guard = events.readable().await?;
            let event = match guard.try_io(spawner::receive) {
                Ok(event) => event,
                Err(_would_block) => continue,
            };
            match event {
                Ok(Some(Event::Started(pid))) => self.child = Some(Pid::from_raw(pid)),
                Ok(Some(Event::Failed(errno))) => {
                    self.phase = Phase::Parked;
                    let cause = io::Error::from_raw_os_error(errno);
                    return Err(io::Error::new(
                        cause.kind(),
                        format!("it could not be started: {cause}"),
                    ));
                }
                Ok(Some(Event::Ended(raw))) => {
                    self.phase = Phase::Ended;
                    let pid = self.child.unwrap_or(Pid::from_raw(0));
                    return WaitStatus::from_raw(pid, raw).map_err(io::Error::from);
                }
                Ok(None) => {
                    self.phase = Phase::Broken;
                    return Err(gone());
                }
                Err(e) => {
                    self.phase = Phase::Broken;
                    return Err(e);
                }
            }
        }
    }

    /// SIGKILL to every process of the run (all members of the cgroup but the spawner, and
    /// waits until they are gone); without a cgroup, to the program's process group.
    pub(crate) fn kill(&self) {
        let Some(spawner) = &self.spawner else { return };
        match &spawner.cgroup {
            Some(cg) => cg.kill_all(Some(spawner.pid.as_raw())),
            None => {
                if let Some(child) = self.child {
                    let _ = killpg(child, Signal::SIGKILL);
                }
            }
        }
    }

    /// Whether the kernel killed a process of this run for exceeding the memory limit.
    pub(crate) fn oom_killed(&mut self) -> bool {
        let Some(spawner) = &mut self.spawner else {
            return false;
        };
        let Some(cg) = &spawner.cgroup else { return false };
        let count = cg.oom_kills();
        let killed = count > spawner.oom_kills;
        spawner.oom_kills = count;
        killed
    }

    /// Gives the spawner back for another run if `reusable` and the run ended; otherwise it is
    /// retired.
    pub(crate) fn finish(mut self, reusable: bool) {
        if !reusable && self.phase != Phase::Broken {
            self.phase = Phase::Broken;
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.events = None;
        let Some(spawner) = self.spawner.take() else {
            return;
        };
        match self.phase {
            Phase::Parked | Phase::Ended => {
                if let Some(cg) = &spawner.cgroup {
                    cg.reset_peak();
                }
                self.pool.shared.give_back(spawner);
            }
            Phase::Running | Phase::Broken => {
                // Put the spawner back so that `kill` can spare it, then retire it.
                self.spawner = Some(spawner);
                self.kill();
                if let Some(spawner) = self.spawner.take() {
                    self.pool.shared.retire(spawner);
                }
            }
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the spawner is gone")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_pool_leaves_no_spawner_and_no_cgroup() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let pool = Pool::default();
        let (pids, dirs) = rt.block_on(async {
            let first = pool.lease(8, 64 << 20).await.expect("a spawner");
            let second = pool.lease(8, 64 << 20).await.expect("a spawner");
            let spawners = [&first, &second].map(|l| l.spawner.as_ref().expect("leased"));
            let pids = spawners.map(|s| s.pid);
            let dirs: Vec<_> = spawners
                .iter()
                .filter_map(|s| s.cgroup.as_ref())
                .map(Cgroup::dir)
                .collect();
            (pids, dirs)
            // Both leases go back to the pool here, parked.
        });
        for pid in pids {
            assert!(kill(pid, None).is_ok(), "a parked spawner is alive");
        }
        drop(pool);
        for pid in pids {
            // Reaped by the pool: no such process (or, after pid reuse, not our child).
            assert!(
                waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_err(),
                "spawner {pid} is still our child"
            );
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while dirs.iter().any(|d| d.exists()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(dirs.iter().all(|d| !d.exists()), "cgroups left: {dirs:?}");
    }
}
