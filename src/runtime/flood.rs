//! Garbage and floods aimed at a node's UDP port (`docs/security.md`): what the flood test and the
//! `flood` benchmark send (the run under attack is `experiment::flood`). Loopback only by construction (the sender binds 127.0.0.1), bounded
//! by a deadline and a datagram count.
//!
//! Every datagram is one of the [`Garbage`] kinds in turn; none carries a valid MAC (the
//! sender has no key), so an authenticated node must drop every one and count it.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

use crate::transport::udp::{HEADER_LEN, MAGIC, MAX_DATAGRAM, VERSION};

/// The kinds of bad datagram sent, in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Garbage {
    /// Random bytes, 1..=1400 of them.
    Random,
    /// A plausible header cut short (1..HEADER_LEN bytes).
    Truncated,
    /// Longer than the largest datagram (up to 9000 bytes).
    Oversized,
    /// A well-formed header whose length field does not match the datagram.
    WrongLength,
    /// A well-formed DATA datagram claiming to come from `claimed` rank, with a forged tag.
    Forged,
}

const KINDS: [Garbage; 5] = [
    Garbage::Random,
    Garbage::Truncated,
    Garbage::Oversized,
    Garbage::WrongLength,
    Garbage::Forged,
];

/// A flood in progress: datagrams sent so far, and a handle to stop it.
pub struct Flood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

/// Fills `out` with one datagram of kind `g` for a job `job` (rank `to` the target), returns
/// its length.
pub fn garbage(g: Garbage, rng: &mut Xoshiro256PlusPlus, job: u64, claimed: u32, to: u32, out: &mut [u8]) -> usize {
    let header = |out: &mut [u8], len: u16, rng: &mut Xoshiro256PlusPlus| {
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = VERSION;
        out[5] = 1;
        out[6..8].copy_from_slice(&len.to_le_bytes());
        out[8..16].copy_from_slice(&job.to_le_bytes());
        out[16..20].copy_from_slice(&claimed.to_le_bytes());
        out[20..24].copy_from_slice(&to.to_le_bytes());
        out[24..32].copy_from_slice(&(rng.next_u64() % 64).to_le_bytes());
        out[32..48].fill(0);
        rng.fill_bytes(&mut out[48..HEADER_LEN]);
    };
    match g {
        Garbage::Random => {
            let n = 1 + (rng.next_u64() % 1400) as usize;
            rng.fill_bytes(&mut out[..n]);
            n
        }
        Garbage::Truncated => {
            header(out, 0, rng);
            1 + (rng.next_u64() % (HEADER_LEN as u64 - 1)) as usize
        }
        Garbage::Oversized => {
            let n = MAX_DATAGRAM + 1 + (rng.next_u64() % (9000 - MAX_DATAGRAM as u64)) as usize;
            header(out, (n - HEADER_LEN) as u16, rng);
            n
        }
        Garbage::WrongLength => {
            let payload = (rng.next_u64() % 64) as usize;
            header(out, (payload + 1 + (rng.next_u64() % 8) as usize) as u16, rng);
            HEADER_LEN + payload
        }
        Garbage::Forged => {
            let payload = 8;
            header(out, payload as u16, rng);
            rng.fill_bytes(&mut out[HEADER_LEN..HEADER_LEN + payload]);
            HEADER_LEN + payload
        }
    }
}

impl Flood {
    /// Sends garbage to `target` from `from` (a 127.0.0.1 address; port 0 for any) as fast as
    /// the socket takes it, until `stop` is called, `deadline` passes or `max` datagrams went.
    /// `claimed` is the sender rank the headers claim, `to` the target's rank.
    pub fn start(
        from: SocketAddr,
        target: SocketAddr,
        job: u64,
        claimed: u32,
        to: u32,
        deadline: Duration,
        max: u64,
    ) -> std::io::Result<Flood> {
        if !from.ip().is_loopback() || !target.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "floods are loopback only",
            ));
        }
        let sock = UdpSocket::bind(from)?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, sent2) = (stop.clone(), sent.clone());
        let handle = std::thread::spawn(move || {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(target.port()) ^ job);
            let mut buf = vec![0u8; 9000];
            let end = Instant::now() + deadline;
            let mut i = 0u64;
            while i < max && !stop2.load(Ordering::Relaxed) {
                if i.is_multiple_of(1024) && Instant::now() >= end {
                    break;
                }
                let g = KINDS[(i % KINDS.len() as u64) as usize];
                let n = garbage(g, &mut rng, job, claimed, to, &mut buf);
                // A full socket buffer or a closed port (the node is gone) is not an error here.
                if sock.send_to(&buf[..n], target).is_ok() {
                    sent2.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
            Ok(())
        });
        Ok(Flood {
            stop,
            sent,
            handle: Some(handle),
        })
    }

    /// Datagrams sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Stops the flood and returns the datagrams sent.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.sent()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// 127.0.0.1 with a port chosen by the kernel.
pub fn any_loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}
