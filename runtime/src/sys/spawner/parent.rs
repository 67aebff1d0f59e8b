//! The host's side of a spawner: fork it, send it commands, read what it reports.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;

use super::child::{self, ChildMemory};
use super::wire::{Event, MAX_MESSAGE, MAX_STRINGS, Message};

/// The stack of the `clone` child (which only calls a few libc functions before `exec`).
const CHILD_STACK: usize = 64 * 1024;

/// A forked spawner, parked on its control socket.
#[derive(Debug)]
pub(crate) struct Forked {
    pub(crate) pid: Pid,
    pub(crate) control: OwnedFd,
}

/// Forks a spawner. It becomes the leader of its own process group, dies with the calling
/// thread (`PR_SET_PDEATHSIG`), closes every descriptor but its control socket and waits for
/// commands until its control socket is closed.
pub(crate) fn fork() -> io::Result<Forked> {
    let (parent_end, child_end) = socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // Allocated before the fork: the spawner only ever writes into its own copies.
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    let mut table: Vec<*const libc::c_char> = vec![std::ptr::null(); MAX_STRINGS + 2];
    let mut stack = vec![0u128; CHILD_STACK / 16];
    let parent = nix::unistd::getpid();
    let memory = ChildMemory {
        buf: buf.as_mut_ptr(),
        buf_len: buf.len(),
        table: table.as_mut_ptr(),
        table_len: table.len(),
        stack_top: stack.as_mut_ptr_range().end.cast(),
    };
    // SAFETY: after fork the child runs `child::main`, which never returns (it exits) and only
    // makes async-signal-safe calls on memory allocated before the fork (see the module
    // documentation). The parent continues normally.
    #[allow(clippy::disallowed_methods)]
    let forked = unsafe { nix::unistd::fork() }?;
    match forked {
        nix::unistd::ForkResult::Child => child::main(child_end.as_raw_fd(), parent, memory),
        nix::unistd::ForkResult::Parent { child } => {
            drop(child_end);
            // Also set from this side, so the group exists whichever runs first.
            let _ = nix::unistd::setpgid(child, child);
            Ok(Forked {
                pid: child,
                control: parent_end,
            })
        }
    }
}

/// Sends a command and the descriptors the program gets as 0, 1, 2 (and 3). The spawner
/// holds its own copies from here on; the caller may close its ends.
pub(crate) fn send(control: &OwnedFd, message: &Message, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if !(3..=4).contains(&fds.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a spawner takes 3 or 4 descriptors",
        ));
    }
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [io::IoSlice::new(&message.0)];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let sent = socket::sendmsg::<()>(
        control.as_raw_fd(),
        &iov,
        &cmsg,
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        None,
    )?;
    if sent != message.0.len() {
        return Err(io::Error::other("the spawner took part of its command"));
    }
    Ok(())
}

/// Receives one event without blocking: `Ok(None)` at end of file (the spawner is gone),
/// `WouldBlock` when there is none yet.
pub(crate) fn receive(control: impl AsFd) -> io::Result<Option<Event>> {
    let mut bytes = [0u8; 16];
    let n = socket::recv(control.as_fd().as_raw_fd(), &mut bytes, MsgFlags::MSG_DONTWAIT)?;
    if n == 0 {
        return Ok(None);
    }
    bytes
        .get(..n)
        .and_then(Event::decode)
        .map(Some)
        .ok_or_else(|| io::Error::other("the spawner sent a malformed event"))
}
