//! wrun's benchmark: prints figures measured in one run, with the ratios the targets are
//! stated in. Run with `cargo bench -p wrun-tests`; figures go into BENCHMARKS.md.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, Module, PoolingAllocationConfig, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wrun_runtime::{Access, Allocator, Job, Limits, Sandbox, WasmConfig, WasmModule, WasmSandbox};
use wrun_tests::GUEST_WASM;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // `cargo bench -p wrun-tests -- native` runs only the native part.
    if std::env::args().any(|a| a == "native") {
        native_bench::run(&rt);
        return;
    }
    let module = WasmModule::from_file(Path::new(GUEST_WASM), 1 << 30).unwrap();
    let worktree = tempfile::tempdir().unwrap();
    println!("wrun benchmark ({} bytes guest module)\n", module.bytes().len());

    println!("## Warm per-run time (no-op helper, cache warm, median of many)");
    for (label, pooling) in [("on-demand", false), ("pooling", true)] {
        let floor = floor_per_run(module.bytes(), pooling);
        let wrun = wrun_per_run(&rt, &module, worktree.path(), pooling);
        println!(
            "{label:>9}: wasmtime InstancePre floor {:>7.1} µs | wrun {:>7.1} µs | ratio {:.2}x",
            micros(floor),
            micros(wrun),
            ratio(wrun, floor)
        );
    }

    println!("\n## Cold process: compile vs disk cache (new engine each time)");
    let cache = tempfile::tempdir().unwrap();
    let compile = first_run(&rt, &module, cache.path());
    let mut disk = Vec::new();
    for _ in 0..5 {
        disk.push(first_run(&rt, &module, cache.path()));
    }
    let disk = median(disk);
    println!(
        "first run, compiling {:>8.2} ms | first run, disk cache warm {:>6.2} ms | speed-up {:.1}x",
        millis(compile),
        millis(disk),
        ratio(compile, disk)
    );

    println!("\n## Fuel metering on a CPU-bound helper (median of 5)");
    for (label, args) in [
        ("scan 64 MiB (loop)", ["scan", "64"]),
        ("fib 35 (calls)", ["fib", "35"]),
    ] {
        let off = cpu_run(&rt, &module, &args, None);
        let on = cpu_run(&rt, &module, &args, Some(u64::MAX / 2));
        println!(
            "{label:>18}: fuel off {:>7.1} ms | fuel on {:>7.1} ms | ratio {:.3}x",
            millis(off),
            millis(on),
            ratio(on, off)
        );
    }

    native_bench::run(&rt);
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

const WARM_RUNS: usize = 2000;

/// Median over batches of the per-run time of `f`.
fn per_run(mut f: impl FnMut()) -> Duration {
    for _ in 0..200 {
        f();
    }
    let batches = (0..10)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..WARM_RUNS / 10 {
                f();
            }
            t.elapsed() / (WARM_RUNS / 10) as u32
        })
        .collect();
    median(batches)
}

/// wasmtime on its own: one engine, `InstancePre`, a fresh store and WASI context per run,
/// instantiate and call `_start`. Nothing wrun adds (limits, capture, preopens, timeout).
fn floor_per_run(bytes: &[u8], pooling: bool) -> Duration {
    let mut config = Config::new();
    if pooling {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(
            PoolingAllocationConfig::default(),
        ));
    }
    let engine = Engine::new(&config).unwrap();
    let module = Module::new(&engine, bytes).unwrap();
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    p1::add_to_linker_sync(&mut linker, |s| s).unwrap();
    let pre = linker.instantiate_pre(&module).unwrap();
    per_run(|| {
        let ctx = WasiCtxBuilder::new().arg("guest").arg("noop").build_p1();
        let mut store = Store::new(&engine, ctx);
        let instance = pre.instantiate(&mut store).unwrap();
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start").unwrap();
        start.call(&mut store, ()).unwrap();
    })
}

/// wrun: the same module through the `Sandbox` trait with a read-only worktree, limits,
/// capture and the timeout, memory cache warm.
fn wrun_per_run(
    rt: &tokio::runtime::Runtime,
    module: &WasmModule,
    worktree: &Path,
    pooling: bool,
) -> Duration {
    let mut config = WasmConfig::default();
    if pooling {
        config.allocator = Allocator::Pooling { instances: 64 };
    }
    let sandbox = WasmSandbox::new(config).unwrap();
    let job = Job::wasm(module.clone())
        .arg("noop")
        .worktree(worktree, Access::ReadOnly);
    per_run(|| {
        let out = rt.block_on(sandbox.run(job.clone())).unwrap();
        assert!(out.status.success());
    })
}

fn first_run(rt: &tokio::runtime::Runtime, module: &WasmModule, cache: &Path) -> Duration {
    let mut config = WasmConfig::default();
    config.cache_dir = Some(cache.to_owned());
    let t = Instant::now();
    let sandbox = WasmSandbox::new(config).unwrap();
    let out = rt
        .block_on(sandbox.run(Job::wasm(module.clone()).arg("noop")))
        .unwrap();
    let elapsed = t.elapsed();
    assert!(out.status.success());
    elapsed
}

fn cpu_run(rt: &tokio::runtime::Runtime, module: &WasmModule, args: &[&str], fuel: Option<u64>) -> Duration {
    let mut limits = Limits::default().with_timeout(Duration::from_secs(600));
    if let Some(fuel) = fuel {
        limits = limits.with_fuel(fuel);
    }
    let sandbox = WasmSandbox::new(WasmConfig::default()).unwrap();
    let job = Job::wasm(module.clone())
        .args(args.iter().copied())
        .limits(limits);
    rt.block_on(sandbox.run(job.clone())).unwrap();
    let times = (0..5)
        .map(|_| {
            let out = rt.block_on(sandbox.run(job.clone())).unwrap();
            assert!(out.status.success(), "{:?}", out.status);
            out.usage.wall_time
        })
        .collect();
    median(times)
}

mod native_bench {
    use std::ffi::OsString;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use wrun_runtime::{Job, NativeConfig, NativeSandbox, Sandbox, SandboxMode};

    const RUNS: usize = 300;

    /// The median time of each of `runs`, called in turn `RUNS` times after a warm-up.
    fn interleaved<const N: usize>(runs: [&dyn Fn(); N]) -> [Duration; N] {
        for run in &runs {
            for _ in 0..20 {
                run();
            }
        }
        let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(RUNS));
        for _ in 0..RUNS {
            for (run, times) in runs.iter().zip(&mut times) {
                let t = Instant::now();
                run();
                times.push(t.elapsed());
            }
        }
        times.map(|mut t| {
            t.sort();
            t[t.len() / 2]
        })
    }

    pub(super) fn run(rt: &tokio::runtime::Runtime) {
        println!("\n## Native: a trivial helper (/bin/true), median of {RUNS}");
        let sandbox = NativeSandbox::new(NativeConfig::new(
            Some("/usr/bin/bwrap".into()),
            SandboxMode::Require,
        ))
        .unwrap();
        if let Err(reason) = rt.block_on(sandbox.probe()) {
            println!("skipped: {reason}");
            return;
        }
        let job = Job::native("/bin/true");
        let argv = sandbox.command_line(&job).unwrap();
        // The raw run gets the same argv and the same seccomp program, on its stdin (fd 0)
        // instead of fd 3.
        let bpf_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(bpf_file.path(), sandbox.seccomp_program().unwrap()).unwrap();
        let raw_argv: Vec<OsString> = {
            let mut v = Vec::new();
            let mut it = argv.iter();
            while let Some(a) = it.next() {
                v.push(a.clone());
                if a == "--seccomp" {
                    it.next();
                    v.push("0".into());
                }
            }
            v
        };
        let exec = |program: &str, args: &[OsString]| {
            let stdin = if program.ends_with("bwrap") {
                Stdio::from(std::fs::File::open(bpf_file.path()).unwrap())
            } else {
                Stdio::null()
            };
            let status = Command::new(program)
                .args(args)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .stdin(stdin)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .unwrap()
                .status;
            assert!(status.success());
        };
        let off = NativeSandbox::new(NativeConfig::new(None, SandboxMode::Off)).unwrap();
        let wrun_run = || {
            let out = rt.block_on(sandbox.run(job.clone())).unwrap();
            assert!(out.status.success());
        };
        let wrun_off_run = || {
            let out = rt.block_on(off.run(job.clone())).unwrap();
            assert!(out.status.success());
        };
        // Interleaved, so that the machine's drift (it is shared) hits every line alike.
        let [unsandboxed, raw, wrun, wrun_off] = interleaved([
            &|| exec("/bin/true", &[]),
            &|| exec("/usr/bin/bwrap", &raw_argv),
            &wrun_run,
            &wrun_off_run,
        ]);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "unsandboxed: plain exec {:.2} ms | wrun mode off (rlimits, cgroup, fd hygiene) {:.2} ms",
            ms(unsandboxed),
            ms(wrun_off)
        );
        println!(
            "unsandboxed exec {:.2} ms | raw bwrap argv {:.2} ms | wrun {:.2} ms | wrun / raw bwrap {:.3}x",
            ms(unsandboxed),
            ms(raw),
            ms(wrun),
            wrun.as_secs_f64() / raw.as_secs_f64()
        );

        // Bursts: more runs at once than the pool keeps parked. With the pool drained (a fresh
        // sandbox, as after a quiet spell) most runs wait for a spawner to be forked; once
        // warm, the pool keeps up to eight. Wall time of the whole burst, median of BURSTS.
        const AT_ONCE: usize = 8;
        const BURSTS: usize = 30;
        let burst = |run: &(dyn Fn() + Sync)| {
            let t = Instant::now();
            std::thread::scope(|scope| {
                for _ in 0..AT_ONCE {
                    scope.spawn(run);
                }
            });
            t.elapsed()
        };
        let raw_run = || exec("/usr/bin/bwrap", &raw_argv);
        let mut bursts: [Vec<Duration>; 3] = Default::default();
        for _ in 0..BURSTS {
            bursts[0].push(burst(&raw_run));
            bursts[1].push(burst(&wrun_run));
            let fresh = NativeSandbox::new(sandbox.config().clone()).unwrap();
            rt.block_on(fresh.probe()).unwrap();
            let wrun_fresh = || {
                let out = rt.block_on(fresh.run(job.clone())).unwrap();
                assert!(out.status.success());
            };
            bursts[2].push(burst(&wrun_fresh));
        }
        let [raw_burst, warm_burst, drained_burst] = bursts.map(|mut b| {
            b.sort();
            b[b.len() / 2]
        });
        println!(
            "{AT_ONCE} at once: raw bwrap {:.2} ms | wrun, pool warm {:.2} ms ({:.3}x) | wrun, pool drained {:.2} ms ({:.3}x)",
            ms(raw_burst),
            ms(warm_burst),
            warm_burst.as_secs_f64() / raw_burst.as_secs_f64(),
            ms(drained_burst),
            drained_burst.as_secs_f64() / raw_burst.as_secs_f64()
        );
    }
}
