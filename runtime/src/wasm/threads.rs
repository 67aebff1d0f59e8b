//! The threads wasm runs are made on (Linux). Each run has a thread to itself for its duration,
//! with a current-thread runtime of its own: the guest's file operations are made right there
//! (a hop to tokio's blocking pool per call costs more than most calls), and a guest that
//! blocks in one holds up its own thread only, never the caller's executor or another run. A
//! thread whose run ended is kept for the next (up to [`MAX_IDLE`]); one whose run was
//! abandoned (its caller gone, or blocked past every interrupt) ends when its run does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, mpsc};

use crate::Error;
use crate::sys::interrupt::{Interrupter, register_current_thread};

/// What a run thread does with a task: runs it to its end on the thread's runtime.
pub(super) type Task = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// Idle threads kept for the next runs: as many as runs may be in flight by default.
const MAX_IDLE: usize = 64;

/// The idle run threads of one sandbox.
#[derive(Debug, Default)]
pub(super) struct RunThreads {
    idle: Mutex<Vec<Worker>>,
    next_run: AtomicU64,
}

#[derive(Debug)]
struct Worker {
    tasks: mpsc::Sender<(u64, Task)>,
    interrupter: Interrupter,
}

/// A run started on a thread: its id, and how to interrupt it while it lasts.
#[derive(Debug)]
pub(super) struct Placed {
    pub(super) run: u64,
    pub(super) interrupter: Interrupter,
    worker: Option<Worker>,
}

impl RunThreads {
    /// Starts `task` on an idle thread, or a new one.
    pub(super) fn start(&self, task: Task) -> Result<Placed, Error> {
        let run = self.next_run.fetch_add(1, Ordering::Relaxed) + 1;
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let worker = match idle {
            Some(worker) => worker,
            None => spawn_worker()?,
        };
        // A worker whose thread is gone (it cannot be: it only ends once its sender is
        // dropped) would hand the task back; start it on a fresh one then.
        let worker = match worker.tasks.send((run, task)) {
            Ok(()) => worker,
            Err(mpsc::SendError((_, task))) => {
                let fresh = spawn_worker()?;
                fresh
                    .tasks
                    .send((run, task))
                    .map_err(|_| Error::Engine("a new run thread ended at once".into()))?;
                fresh
            }
        };
        Ok(Placed {
            run,
            interrupter: worker.interrupter.clone(),
            worker: Some(worker),
        })
    }

    /// The run ended and its result was received: its thread may take the next run.
    pub(super) fn finished(&self, mut placed: Placed) {
        let Some(worker) = placed.worker.take() else {
            return;
        };
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(worker);
        }
    }
}

/// How long a thread that just finished a run looks for the next before it sleeps: a host that
/// runs helpers back to back then hands the next one over without waking a sleeping thread.
const LINGER: std::time::Duration = std::time::Duration::from_micros(200);

/// The next task: looked for without sleeping for [`LINGER`], then waited for.
fn next(received: &mpsc::Receiver<(u64, Task)>) -> Option<(u64, Task)> {
    let start = std::time::Instant::now();
    while start.elapsed() < LINGER {
        match received.try_recv() {
            Ok(task) => return Some(task),
            Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
            Err(mpsc::TryRecvError::Disconnected) => return None,
        }
    }
    received.recv().ok()
}

fn spawn_worker() -> Result<Worker, Error> {
    let (tasks, received) = mpsc::channel::<(u64, Task)>();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("wrun-wasm".into())
        .spawn(move || {
            let setup = register_current_thread().and_then(|(registration, interrupter)| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                Ok((registration, interrupter, runtime))
            });
            let (registration, runtime) = match setup {
                Ok((registration, interrupter, runtime)) => {
                    let _ = ready_tx.send(Ok(interrupter));
                    (registration, runtime)
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            while let Some((run, task)) = next(&received) {
                registration.begin(run);
                task(&runtime);
                registration.end();
            }
        })
        .map_err(|e| Error::Engine(format!("starting a run thread: {e}")))?;
    let interrupter = ready_rx
        .recv()
        .map_err(|_| Error::Engine("a new run thread ended at once".into()))?
        .map_err(|e| Error::Engine(format!("setting up a run thread: {e}")))?;
    Ok(Worker { tasks, interrupter })
}

/// Starts `task` on a thread of its own that first runs `setup` (Landlock confinement, which
/// holds for the thread's life: such a thread is never reused), and ends with the task.
pub(super) fn start_dedicated(
    setup: impl FnOnce() -> Result<(), Error> + Send + 'static,
    task: impl FnOnce(Result<&tokio::runtime::Runtime, Error>) + Send + 'static,
) -> Result<Placed, Error> {
    const RUN: u64 = 1;
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("wrun-wasm-confined".into())
        .spawn(move || {
            let registered = register_current_thread();
            let (registration, interrupter) = match registered {
                Ok(pair) => pair,
                Err(e) => {
                    let _ = ready_tx.send(None);
                    task(Err(Error::Engine(format!("setting up the run's thread: {e}"))));
                    return;
                }
            };
            let _ = ready_tx.send(Some(interrupter));
            registration.begin(RUN);
            let runtime = setup().and_then(|()| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Error::Engine(format!("starting the run's runtime: {e}")))
            });
            match runtime {
                Ok(runtime) => task(Ok(&runtime)),
                Err(e) => task(Err(e)),
            }
            drop(registration);
        })
        .map_err(|e| Error::Engine(format!("starting the run's thread: {e}")))?;
    let interrupter = ready_rx.recv().ok().flatten();
    let interrupter = match interrupter {
        Some(interrupter) => interrupter,
        // No interrupter: the task reports why on its own channel; this one interrupts nothing.
        None => register_current_thread()
            .map(|(_, interrupter)| interrupter)
            .map_err(|e| Error::Engine(format!("setting up the run's thread: {e}")))?,
    };
    Ok(Placed {
        run: RUN,
        interrupter,
        worker: None,
    })
}
