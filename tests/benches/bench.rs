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
        ("fib 30 (calls)", ["fib", "30"]),
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
