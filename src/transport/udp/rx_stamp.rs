//! Kernel receive timestamps (`SO_TIMESTAMPNS`) for the emulated link delay: a held datagram
//! is due `delay` after it reached the socket, not after the receiver next ran. Without the
//! stamp, a receiver that was asleep or waiting for a core added its scheduling latency to
//! every hop on top of the delay; `netem` delays at the sender's qdisc and has no such term.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::recvmsg;

/// Asks the kernel to stamp every received datagram (best effort: without it datagrams are
/// held from when they are read, as before).
pub fn enable(socket: &impl AsRawFd) -> bool {
    recvmsg::enable_option(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
}

/// `CLOCK_REALTIME` now, in nanoseconds (the clock the kernel stamps with).
fn realtime_ns() -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// The instant on the monotonic clock at which a datagram stamped `stamp_ns` (realtime)
/// arrived, given that realtime reads `real_now_ns` at monotonic `now`; clamped to at most
/// 1 s in the past (a step of the realtime clock must not release held datagrams early) and
/// never in the future.
pub fn arrival(now: Instant, real_now_ns: i128, stamp_ns: i128) -> Instant {
    let age = (real_now_ns - stamp_ns).clamp(0, 1_000_000_000) as u64;
    now.checked_sub(Duration::from_nanos(age)).unwrap_or(now)
}

/// Reads one datagram into `buf` without blocking: its length, source and, when the kernel
/// stamped it, its arrival instant. The two clocks are read together right after the read:
/// with the caller's older `now`, a receiver preempted between taking it and reading aged
/// the datagram by the preemption and released it that much early (deliveries at 20 µs over
/// a 50 µs link).
pub fn recv(socket: &impl AsRawFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<Instant>)> {
    let mut stamp: Option<i128> = None;
    let (n, src) = recvmsg::recv(socket, buf, libc::MSG_DONTWAIT, &mut |c| {
        if c.level == libc::SOL_SOCKET && c.kind == libc::SCM_TIMESTAMPNS {
            // SAFETY: SCM_TIMESTAMPNS carries a timespec, a plain C struct.
            let ts = unsafe { c.read::<libc::timespec>() };
            stamp = ts.map(|ts| i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec));
        }
    })?;
    let src = src.ok_or_else(|| io::Error::other("datagram from an unknown address family"))?;
    Ok((n, src, stamp.map(|s| arrival(Instant::now(), realtime_ns(), s))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn arrival_is_in_the_past_and_clamped() {
        let now = Instant::now() + Duration::from_secs(1);
        assert_eq!(arrival(now, 5_000, 2_000), now - Duration::from_nanos(3_000));
        // A stamp from the future (clock stepped back) is now; a very old one at most 1 s.
        assert_eq!(arrival(now, 5_000, 9_000), now);
        assert_eq!(arrival(now, 5_000_000_000, 0), now - Duration::from_secs(1));
    }

    #[test]
    fn a_loopback_datagram_is_stamped_at_its_arrival() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable(&rx));
        // The kernel turns receive stamping on from a work item, shortly after the first
        // socket asks; until then it stamps at read time (the old behaviour, harmless).
        std::thread::sleep(Duration::from_millis(100));
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let now = Instant::now();
        let (n, src, at) = recv(&rx, &mut buf).unwrap();
        assert_eq!((&buf[..n], src), (&b"hello"[..], tx.local_addr().unwrap()));
        // Read 20 ms after it arrived: the stamp says so.
        let at = at.expect("the kernel stamps loopback datagrams");
        let age = now.duration_since(at);
        assert!(
            age >= Duration::from_millis(19) && age < Duration::from_secs(1),
            "{age:?}"
        );
        assert!(matches!(recv(&rx, &mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
    }
}
