//! A sub-millisecond blocking wait for one descriptor: epoll counts in milliseconds (mio
//! rounds up), so a wait due in 20 µs would sleep a whole millisecond; ppoll takes a timespec
//! and sleeps on a high-resolution timer. Used by the UDP socket and the verbs completion
//! channel.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Blocks until `fd` is readable (`Ok(true)`) or `timeout` has passed (`Ok(false)`; also on
/// a signal).
pub fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    any_readable(fd, &[], timeout)
}

/// The most descriptors [`any_readable`] watches besides its first.
pub const MAX_ALSO: usize = 3;

/// Blocks until `fd` or one of `also` (the first [`MAX_ALSO`]) is readable (`Ok(true)`) or
/// `timeout` has passed (`Ok(false)`; also on a signal): a socket, another endpoint's socket
/// and a doorbell, say.
pub fn any_readable(fd: BorrowedFd<'_>, also: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<bool> {
    thread_local! {
        static SLACK_SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !SLACK_SET.get() {
        // Linux lets a timed sleep overrun by the thread's timer slack, 50 µs by default, as
        // much as the delays we time here: ask for 1 µs (best effort).
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes this
        // thread's timer slack; no memory is passed.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        SLACK_SET.set(true);
    }
    let also = &also[..also.len().min(MAX_ALSO)];
    let mut p = [fd; 1 + MAX_ALSO].map(|fd| libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    for (slot, fd) in p[1..].iter_mut().zip(also) {
        slot.fd = fd.as_raw_fd();
    }
    let p = &mut p[..1 + also.len()];
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `p` is a slice of valid, initialized pollfds that outlives the call (nfds = its
    // length); `ts` is a valid timespec; a null signal mask leaves the thread's mask
    // unchanged. The descriptors are borrowed, so they stay open for the duration of the call.
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), p.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        return Ok(false);
    }
    Ok(r > 0 && p.iter().any(|p| p.revents & libc::POLLIN != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_pipe_is_readable_only_once_written() {
        let (r, mut w) = std::io::pipe().unwrap();
        assert!(!readable(r.as_fd(), Duration::from_micros(200)).unwrap());
        std::io::Write::write_all(&mut w, b"x").unwrap();
        assert!(readable(r.as_fd(), Duration::from_secs(5)).unwrap());
    }

    #[test]
    fn any_of_the_pipes_wakes_the_wait() {
        let (r1, _w1) = std::io::pipe().unwrap();
        let (r2, mut w2) = std::io::pipe().unwrap();
        let (r3, mut w3) = std::io::pipe().unwrap();
        assert!(!any_readable(r1.as_fd(), &[r2.as_fd(), r3.as_fd()], Duration::from_micros(200)).unwrap());
        std::io::Write::write_all(&mut w3, b"x").unwrap();
        assert!(any_readable(r1.as_fd(), &[r2.as_fd(), r3.as_fd()], Duration::from_secs(5)).unwrap());
        assert!(!any_readable(r1.as_fd(), &[r2.as_fd()], Duration::from_micros(200)).unwrap());
        std::io::Write::write_all(&mut w2, b"x").unwrap();
        assert!(any_readable(r1.as_fd(), &[r2.as_fd()], Duration::from_secs(5)).unwrap());
    }
}
