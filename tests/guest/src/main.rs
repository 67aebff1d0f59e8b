//! The escape battery's guest: one wasm32-wasip1 program, one scenario per subcommand.
//!
//! Exit codes: 0 the operation succeeded, 2 it failed (the error is printed to stderr as
//! `error: <kind>: <message>`), 64 bad usage. Scenarios that must never return (spin, sleep,
//! alloc bombs, recursion) are ended by wrun's limits.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let rest: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
    let Some(cmd) = args.get(1) else {
        eprintln!("usage: guest SCENARIO [ARGS]");
        return ExitCode::from(64);
    };
    let result = match (cmd.as_str(), rest.as_slice()) {
        ("noop", []) => Ok(()),
        ("hello", []) => {
            println!("hello from wasm");
            Ok(())
        }
        ("args", _) => {
            for a in &args {
                println!("{a}");
            }
            Ok(())
        }
        ("env", []) => {
            for (k, v) in std::env::vars() {
                println!("{k}={v}");
            }
            Ok(())
        }
        ("stdin", []) => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).map(|_| {
                let _ = std::io::stdout().write_all(&buf);
            })
        }
        ("cat", []) => std::io::copy(&mut std::io::stdin(), &mut std::io::stdout()).map(drop),
        ("read", [path]) => std::fs::read(path).map(|b| {
            let _ = std::io::stdout().write_all(&b);
        }),
        ("ls", [path]) => std::fs::read_dir(path).map(|entries| {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for n in names {
                println!("{n}");
            }
        }),
        ("write", [path, content]) => std::fs::write(path, content),
        ("create-new", [path]) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(drop),
        ("truncate", [path]) => std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .map(drop),
        ("append", [path, content]) => std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(content.as_bytes())),
        ("rename", [from, to]) => std::fs::rename(from, to),
        ("link", [from, to]) => std::fs::hard_link(from, to),
        #[allow(deprecated)] // the one stable way to make a symbolic link on wasm32-wasip1
        ("symlink", [target, link]) => std::fs::soft_link(target, link),
        ("rmdir", [path]) => std::fs::remove_dir(path),
        ("mkdir", [path]) => std::fs::create_dir(path),
        ("remove", [path]) => std::fs::remove_file(path),
        ("exit", [code]) => std::process::exit(code.parse().unwrap_or(64)),
        ("flood", [bytes]) => flood(&mut std::io::stdout(), bytes),
        ("flood-stderr", [bytes]) => flood(&mut std::io::stderr(), bytes),
        ("findings", [n]) => findings(n.parse().unwrap_or(0)),
        ("spin", []) => spin(),
        ("sleep", [secs]) => {
            std::thread::sleep(std::time::Duration::from_secs(secs.parse().unwrap_or(3600)));
            Ok(())
        }
        ("alloc", [mib]) => {
            let n: usize = mib.parse::<usize>().unwrap_or(1) << 20;
            let v = vec![1u8; n];
            println!("allocated {}", v.iter().map(|&b| b as usize).sum::<usize>());
            Ok(())
        }
        ("recurse", [depth]) => {
            println!("{}", recurse(depth.parse().unwrap_or(u64::MAX)));
            Ok(())
        }
        ("connect", [addr]) => std::net::TcpStream::connect(addr).map(|_| println!("connected")),
        ("panic", []) => panic!("the helper panicked"),
        ("scan", [mib]) => {
            println!("{}", scan(mib.parse().unwrap_or(16)));
            Ok(())
        }
        ("fib", [n]) => {
            println!("{}", fib(n.parse().unwrap_or(30)));
            Ok(())
        }
        _ => {
            eprintln!("unknown scenario {cmd} {rest:?}");
            return ExitCode::from(64);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {:?}: {e}", e.kind());
            ExitCode::from(2)
        }
    }
}

/// `n` findings on stdout, a line of text after every tenth, written through a small buffer so
/// that records are cut across writes.
fn findings(n: u32) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(100, std::io::stdout());
    for i in 0..n {
        writeln!(
            out,
            r#"{{"wrun_finding":1,"path":"src/f{i}.rs","line":{},"severity":"warning","rule":"many","message":"finding number {i} of {n}"}}"#,
            i + 1
        )?;
        if i % 10 == 9 {
            writeln!(out, "progress: {} done", i + 1)?;
        }
    }
    out.flush()
}

fn flood(out: &mut dyn Write, bytes: &str) -> std::io::Result<()> {
    let mut left: u64 = bytes.parse().unwrap_or(0);
    let chunk = vec![b'x'; 64 * 1024];
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    out.flush()
}

fn spin() -> std::io::Result<()> {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn recurse(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let buf = std::hint::black_box([n; 16]);
    1 + recurse(std::hint::black_box(n - 1)) + buf[3] % 2
}

fn fib(n: u32) -> u64 {
    if n < 2 { n as u64 } else { fib(n - 1) + fib(n - 2) }
}

/// A scanner's inner loop: FNV-1a over `mib` MiB of generated bytes, counting newlines.
fn scan(mib: usize) -> u64 {
    let block: Vec<u8> = (0..65536u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let (mut hash, mut lines) = (0xcbf29ce484222325u64, 0u64);
    for _ in 0..mib * 16 {
        for &b in std::hint::black_box(&block) {
            hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
            lines += (b == b'\n') as u64;
        }
    }
    hash ^ lines
}
