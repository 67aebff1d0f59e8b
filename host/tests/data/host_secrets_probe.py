"""Tries every way a helper of the same user could read secrets out of wrun's processes.

Usage: host_secrets_probe.py CANARY_FILE [PID...]

Without PIDs, the targets are wrun (the parent of this helper's spawner) and every process whose
parent is wrun (its spawners), with all their threads. For each target it tries
/proc/PID/environ, /proc/PID/task/TID/environ, /proc/PID/mem (through /proc/PID/maps),
process_vm_readv and ptrace, and prints one line per attempt:

    found WHERE        the canary was read
    read WHERE         readable, canary not in it
    denied WHERE ERR   refused by the kernel

then its own capability sets, no_new_privs and securebits as `caps ...`.
"""

import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH, PR_GET_SECUREBITS = 16, 17, 27


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


libc.process_vm_readv.argtypes = [
    ctypes.c_int, ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.c_ulong,
]
libc.process_vm_readv.restype = ctypes.c_ssize_t
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def report(where, data, canary):
    print(("found " if canary in data else "read ") + where, flush=True)


def attempt(where, fn, canary):
    try:
        report(where, fn(), canary)
    except OSError as e:
        print(f"denied {where} {errno.errorcode.get(e.errno, e.errno)}", flush=True)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def memory(pid):
    """Every readable mapping of pid, through /proc/PID/maps and /proc/PID/mem."""
    out = b""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in read(f"/proc/{pid}/maps").decode().splitlines():
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            if end - start > 256 << 20:
                continue
            try:
                mem.seek(start)
                out += mem.read(end - start)
            except OSError:
                pass
    return out


def vm_readv(pid):
    """A read of the target's stack through process_vm_readv (the address from its stat)."""
    start_stack = int(read(f"/proc/{pid}/stat").decode().rsplit(")", 1)[1].split()[25])
    address = start_stack or 0x400000
    buf = ctypes.create_string_buffer(4096)
    local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 4096)
    remote = IoVec(address - 4096 if address > 4096 else address, 4096)
    n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n < 0:
        raise OSError(ctypes.get_errno(), "process_vm_readv")
    return buf.raw[:n]


def attach(pid):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) < 0:
        raise OSError(ctypes.get_errno(), "ptrace")
    # Let the target go again: wait for its attach stop, then detach (else it stays stopped).
    os.waitpid(pid, 0x40000000)  # __WALL
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return b"attached"


def main():
    canary = read(sys.argv[1]).strip()
    targets = [int(p) for p in sys.argv[2:]]
    if not targets:
        spawner = os.getppid()
        wrun = int(status(spawner)["PPid"])
        targets = [wrun]
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    if int(status(entry)["PPid"]) == wrun:
                        targets.append(int(entry))
                except OSError:
                    pass
        print(f"targets wrun={wrun} spawners={len(targets) - 1}", flush=True)
    for pid in targets:
        attempt(f"/proc/{pid}/environ", lambda: read(f"/proc/{pid}/environ"), canary)
        for tid in os.listdir(f"/proc/{pid}/task"):
            attempt(f"/proc/{pid}/task/{tid}/environ", lambda: read(f"/proc/{pid}/task/{tid}/environ"), canary)
        attempt(f"/proc/{pid}/mem", lambda: memory(pid), canary)
        attempt(f"process_vm_readv({pid})", lambda: vm_readv(pid), canary)
        attempt(f"ptrace({pid})", lambda: attach(pid), b"attached")
    mine = status("self")
    securebits = libc.prctl(PR_GET_SECUREBITS, 0, 0, 0, 0)
    caps = " ".join(f"{k}={mine[k]}" for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"))
    print(f"caps {caps} securebits={securebits}", flush=True)


main()
