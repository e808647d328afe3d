//! Fault injection as a link wrapper: [`Impaired`] drops, reorders and delays the datagrams
//! its inner link receives, below the reliability core, so that every injected fault is
//! repaired by acknowledgement and retransmission exactly like a real one. It is chosen from
//! [`UdpConfig`]'s `loss`, `reorder`, `delay` and `delay_jitter`; without them the endpoint
//! reads its socket directly.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

use super::UdpConfig;
use super::delay::DelayLine;
use super::header::MAX_DATAGRAM;
use super::link::{Link, Recv};

/// A link whose received datagrams are lost with probability `loss`, held back behind the
/// next one with probability `reorder` (one at a time), and then, with a delay configured,
/// held `delay` plus up to `delay_jitter` (`DelayLine`).
pub struct Impaired<L> {
    inner: L,
    loss: f64,
    reorder: f64,
    /// The loss and reorder draws (seeded from the job seed and the rank).
    rng: Option<Xoshiro256PlusPlus>,
    /// The datagram held back by the reorder injector.
    hbuf: Box<[u8]>,
    held: Option<(usize, SocketAddr)>,
    /// The emulated link delay, when configured.
    delay: Option<Box<DelayLine>>,
    injected_losses: u64,
}

/// Whether `cfg` asks for any impairment.
pub fn wanted(cfg: &UdpConfig) -> bool {
    cfg.loss > 0.0 || cfg.reorder > 0.0 || delayed(cfg)
}

/// Whether `cfg` asks for an emulated link delay.
pub fn delayed(cfg: &UdpConfig) -> bool {
    !cfg.delay.is_zero() || !cfg.delay_jitter.is_zero()
}

fn random_unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl<L: Link> Impaired<L> {
    /// Wraps `inner` with the impairments `cfg` asks for at endpoint `rank` (whose number
    /// seeds the injectors with `cfg.seed`).
    pub fn new(inner: L, cfg: &UdpConfig, rank: u32) -> Self {
        let rng = (cfg.loss > 0.0 || cfg.reorder > 0.0).then(|| {
            let mix = u64::from(rank).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ mix)
        });
        let delay = delayed(cfg).then(|| {
            Box::new(DelayLine::new(
                cfg.delay,
                cfg.delay_jitter,
                MAX_DATAGRAM,
                cfg.seed ^ u64::from(rank),
            ))
        });
        Impaired {
            inner,
            loss: cfg.loss,
            reorder: cfg.reorder,
            rng,
            hbuf: vec![0; MAX_DATAGRAM + 1].into_boxed_slice(),
            held: None,
            delay,
            injected_losses: 0,
        }
    }

    /// The wrapped link.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The wrapped link, mutably.
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }
}

impl<L: Link> Link for Impaired<L> {
    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Recv> {
        let got = self.inner.recv(buf, now)?;
        let Recv::Datagram { len, src, arrived } = got else {
            return Ok(got);
        };
        if let Some(rng) = self.rng.as_mut() {
            if random_unit(rng) < self.loss {
                self.injected_losses += 1;
                return Ok(Recv::Consumed);
            }
            if self.held.is_none() && random_unit(rng) < self.reorder {
                self.hbuf[..len].copy_from_slice(&buf[..len]);
                self.held = Some((len, src));
                return Ok(Recv::Consumed);
            }
        }
        if let Some(line) = self.delay.as_mut() {
            // Due `delay` after the kernel's arrival stamp (rx_stamp.rs) when there is one.
            if !line.push(&buf[..len], src, arrived.unwrap_or(now)) {
                self.injected_losses += 1;
            }
            return Ok(Recv::Consumed);
        }
        Ok(got)
    }

    fn send(&mut self, d: &[u8], to: SocketAddr) {
        self.inner.send(d, to);
    }

    fn take_held(&mut self, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        let (len, src) = self.held.take()?;
        buf[..len].copy_from_slice(&self.hbuf[..len]);
        Some((len, src))
    }

    fn take_due(&mut self, buf: &mut [u8], now: Instant) -> Option<(usize, SocketAddr)> {
        let line = self.delay.as_mut()?;
        let mut out = None;
        line.pop_due(now, &mut |d, src| {
            buf[..d.len()].copy_from_slice(d);
            out = Some((d.len(), src));
        });
        out
    }

    fn next_due(&self) -> Option<Instant> {
        self.delay.as_ref().and_then(|l| l.next_due())
    }

    fn injected_losses(&self) -> u64 {
        self.injected_losses + self.inner.injected_losses()
    }
}
