//! The group's agreements: one ERA instance per member (Herault et al., SC 2015), driven
//! over endpoints of their own, on a 64-bit AND (`MPIX_Comm_agree`'s flag). Members learn of
//! a crash from the group at once (the in-process perfect detector) and from their transport
//! (a suspected peer); ERA then agrees on the failed set as well as on the value (§3).

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::Instant;

use super::Event;
use crate::protocol::agree::{And64, Era, EraConfig, EraMsg};
use crate::runtime::Endpoints;
use crate::transport::{Delivery, SendError, Transport};
use crate::wire::{HEADER_LEN, WireMessage, decode_datagram, encode_datagram};

/// One member's side.
struct Member {
    era: Era<And64>,
    tp: Box<dyn Transport>,
    on_death: Option<Box<dyn FnMut() + Send>>,
    /// Values the user contributed that ERA's window has not taken yet.
    queued: VecDeque<u64>,
    /// Datagrams a full retransmit window refused, retried in order.
    backlog: VecDeque<(u32, Vec<u8>)>,
}

/// Every member's ERA (`None`: crashed).
pub(super) struct Agreements {
    members: Vec<Option<Member>>,
    job: u64,
    n: u32,
    out: Vec<u8>,
}

impl Agreements {
    pub(super) fn new(eps: Endpoints, n: u32, job: u64) -> Result<Self, String> {
        let members = eps
            .into_iter()
            .enumerate()
            .map(|(r, (tp, on_death))| {
                Ok(Some(Member {
                    era: Era::new(r as u32, n, EraConfig::default())?,
                    tp,
                    on_death,
                    queued: VecDeque::new(),
                    backlog: VecDeque::new(),
                }))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            members,
            job,
            n,
            // Room for the largest message; what is sent is at most a datagram (the members
            // are few enough, `MAX_AGREE_MEMBERS`).
            out: vec![0; HEADER_LEN + EraMsg::<And64>::MAX_BODY],
        })
    }

    /// Member `r` enters its next agreement with `value`.
    pub(super) fn agree(&mut self, r: u32, value: u64) {
        if let Some(m) = self.members[r as usize].as_mut() {
            m.queued.push_back(value);
        }
    }

    /// Member `r` crashed: its endpoint closes, every other member's ERA learns it.
    pub(super) fn kill(&mut self, r: u32) {
        if let Some(mut m) = self.members[r as usize].take()
            && let Some(f) = m.on_death.as_mut()
        {
            f();
        }
        for m in self.members.iter_mut().flatten() {
            m.era.on_dead(r);
        }
    }

    /// Receives, sends and reports what returned; true if anything happened. A member whose
    /// endpoint was fenced is added to `fenced` with the member that fenced it (the caller
    /// stops it).
    pub(super) fn step(
        &mut self,
        now: Instant,
        events: &mpsc::Sender<Event>,
        fenced: &mut Vec<(u32, Option<u32>)>,
    ) -> bool {
        let mut progress = false;
        let (job, n) = (self.job, self.n);
        let mut stopped = None;
        for (r, slot) in self.members.iter_mut().enumerate() {
            let Some(m) = slot.as_mut() else { continue };
            while let Some(&v) = m.queued.front() {
                if m.era.agree(And64(v)).is_err() {
                    break;
                }
                m.queued.pop_front();
                progress = true;
            }
            let era = &mut m.era;
            let got = m.tp.poll(now, &mut |d| match d {
                Delivery::Message { from, bytes } => {
                    // What does not decode, or claims another sender, is dropped.
                    if let Ok((h, msg, _)) = decode_datagram::<EraMsg<And64>>(bytes, job, n)
                        && h.sender == from
                    {
                        era.on_message(from, msg);
                    }
                }
                Delivery::Suspect { peer } => era.on_dead(peer),
                // A peer's transport suspected this member and fenced it: it crashes.
                Delivery::Fenced { by } => stopped = Some(by),
            });
            if let Some(by) = stopped.take() {
                fenced.push((r as u32, Some(by)));
                continue;
            }
            progress |= matches!(got, Ok(k) if k > 0);
            progress |= flush(m, now);
            while let Some((to, msg)) = m.era.poll_send() {
                progress = true;
                let Ok(len) = encode_datagram(&mut self.out, job, 0, msg.id(), r as u32, &msg, &[]) else {
                    continue;
                };
                send(m, to, &self.out[..len], now);
            }
            while let Some(o) = m.era.poll_outcome() {
                progress = true;
                let _ = events.send(Event::Agreed {
                    member: r as u32,
                    id: o.id,
                    value: o.value.0,
                    failed: o.failed.as_slice().to_vec(),
                });
            }
        }
        progress
    }
}

/// Sends, or queues behind `to`'s earlier refused datagrams (per-peer order is kept).
fn send(m: &mut Member, to: u32, bytes: &[u8], now: Instant) {
    if !m.backlog.iter().any(|(d, _)| *d == to) {
        match m.tp.send(to, bytes, now) {
            Err(SendError::WindowFull) => {}
            // Sent, or to a suspected peer (ERA hears of it from the transport).
            _ => return,
        }
    }
    m.backlog.push_back((to, bytes.to_vec()));
}

/// Retries refused datagrams in order; true if one left.
fn flush(m: &mut Member, now: Instant) -> bool {
    let mut progress = false;
    let mut blocked: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < m.backlog.len() {
        let to = m.backlog[i].0;
        if blocked.contains(&to) {
            i += 1;
            continue;
        }
        if m.tp.send(to, &m.backlog[i].1, now) == Err(SendError::WindowFull) {
            blocked.push(to);
            i += 1;
        } else {
            m.backlog.remove(i);
            progress = true;
        }
    }
    progress
}
