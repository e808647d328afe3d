//! The verbs connection data of a booted run (`bench --boot`) exchanged
//! peer to peer, without a coordinator: once the bootstrap ([`crate::runtime::bootstrap`]) has
//! given every node the address table, each node sends each peer, on its bootstrap socket,
//! the one [`ConnInfo`] it made for that peer and collects the one each peer made for it.
//!
//! Datagrams are [`Dir::Peer`] chunks of [`crate::wire::conn_relay`] (its encoding and
//! validation), sealed with the job key like every control datagram ([`crate::wire::mac`]). Each carries two flags:
//! [`PEER_HAVE`] ("got yours") and [`PEER_NEED`] ("I have not seen your got-yours"). A node
//! is done with a peer once it holds the peer's record and has seen the peer's `HAVE`; it
//! re-sends to the peers it is not done with, backing off from 5 ms to 100 ms, and answers at
//! once a datagram that lacks `HAVE`, asks with `NEED`, or brought a new record (so a
//! duplicate is answered and two done nodes stop talking). When done with every peer it
//! lingers, answering late repeats of a peer whose last "got yours" was lost.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::wire::conn::ConnInfo;
use crate::wire::conn_relay::{self, Dir, PEER_HAVE, PEER_NEED, RelayError};
use crate::wire::mac::AuthKey;
use crate::wire::mac::{opened, sealed};

/// Smallest and largest pause between two re-sends to the peers not yet done.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LAST_PAUSE: Duration = Duration::from_millis(100);

/// One node's part of the exchange.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    pub rank: u32,
    pub n: u32,
    pub job: u64,
    /// The job's largest message: records whose rings cannot hold it are refused.
    pub max_msg: u32,
    /// Whole exchange, lingering excluded; on expiry a one-line error names the missing peers.
    pub timeout: Duration,
    /// How long a done node keeps answering late repeats.
    pub linger: Duration,
    /// Test support: drop every `drop_every`-th datagram this node sends (0: none).
    pub drop_every: u32,
    pub key: Option<AuthKey>,
}

/// The outcome: the records addressed to this node, and counters.
#[derive(Clone, Debug)]
pub struct PeerReport {
    /// Indexed by sender (`None` at this node's rank).
    pub theirs: Vec<Option<ConnInfo>>,
    pub sent: u64,
    pub received: u64,
    /// Datagrams refused: unsealed or foreign key, not a peer chunk, bad chunk, wrong source
    /// address, not addressed to this node.
    pub dropped: u64,
    pub injected_losses: u64,
}

struct Node<'a> {
    cfg: &'a PeerConfig,
    sock: &'a UdpSocket,
    addrs: &'a [SocketAddr],
    /// This node's record for each peer, by addressee.
    mine: Vec<Option<ConnInfo>>,
    theirs: Vec<Option<ConnInfo>>,
    confirmed: Vec<bool>,
    attempts: u64,
    rep: PeerReport,
    problem: Option<String>,
}

impl Node<'_> {
    fn done_with(&self, p: usize) -> bool {
        p == self.cfg.rank as usize || (self.theirs[p].is_some() && self.confirmed[p])
    }

    fn send(&mut self, p: usize) {
        let Some(info) = &self.mine[p] else { return };
        let mut flags = 0;
        if self.theirs[p].is_some() {
            flags |= PEER_HAVE;
        }
        if !self.confirmed[p] {
            flags |= PEER_NEED;
        }
        self.attempts += 1;
        if self.cfg.drop_every > 0 && self.attempts.is_multiple_of(u64::from(self.cfg.drop_every)) {
            self.rep.injected_losses += 1;
            return;
        }
        let d = sealed(
            self.cfg.key.as_ref(),
            &conn_relay::encode_peer(self.cfg.job, self.cfg.n, info, flags),
        );
        if self.sock.send_to(&d, self.addrs[p]).is_ok() {
            self.rep.sent += 1;
        }
    }

    /// Takes one datagram; `Err` only for a record contradicting one already held.
    fn take(&mut self, d: &[u8], from: SocketAddr) -> Result<(), String> {
        let c = match opened(self.cfg.key.as_ref(), d)
            .filter(|b| conn_relay::is_chunk(b))
            .map(|b| conn_relay::decode(b, self.cfg.job, self.cfg.n, self.cfg.max_msg))
        {
            Some(Ok(c)) => c,
            Some(Err(e)) => return self.refuse(e.to_string()),
            None => return self.refuse("not a sealed connection-data datagram".into()),
        };
        let p = c.rank as usize;
        let me = self.cfg.rank;
        if c.dir != Dir::Peer || p == me as usize || c.infos[0].to != me || self.addrs[p] != from {
            return self.refuse(format!("a datagram from {from} not meant for rank {me}"));
        }
        self.rep.received += 1;
        let new = match &self.theirs[p] {
            Some(old) if *old == c.infos[0] => false,
            Some(_) => {
                return Err(format!(
                    "verbs connection data peer to peer: rank {p} sent rank {me} a {}",
                    RelayError::Conflict
                ));
            }
            None => {
                self.theirs[p] = Some(c.infos[0]);
                true
            }
        };
        if c.flags & PEER_HAVE != 0 {
            self.confirmed[p] = true;
        }
        if new || c.flags & PEER_NEED != 0 || c.flags & PEER_HAVE == 0 {
            self.send(p);
        }
        Ok(())
    }

    fn refuse(&mut self, why: String) -> Result<(), String> {
        self.rep.dropped += 1;
        self.problem = Some(why);
        Ok(())
    }

    /// Receives for at most `wait`; `Err` as [`Node::take`].
    fn receive(&mut self, buf: &mut [u8], wait: Duration) -> Result<(), String> {
        let _ = self.sock.set_read_timeout(Some(wait.max(Duration::from_micros(100))));
        match self.sock.recv_from(buf) {
            Ok((len, from)) => {
                let d = buf[..len].to_vec();
                self.take(&d, from)
            }
            Err(_) => Ok(()),
        }
    }

    fn missing(&self) -> String {
        let list = |v: Vec<usize>| {
            let shown: Vec<String> = v.iter().take(16).map(|r| r.to_string()).collect();
            let more = if v.len() > 16 {
                format!(" and {} more", v.len() - 16)
            } else {
                String::new()
            };
            format!("{}{more}", shown.join(", "))
        };
        let others = (0..self.cfg.n as usize).filter(|&p| p != self.cfg.rank as usize);
        let no_record: Vec<usize> = others.clone().filter(|&p| self.theirs[p].is_none()).collect();
        let no_receipt: Vec<usize> = others.filter(|&p| !self.confirmed[p]).collect();
        let mut parts = Vec::new();
        if !no_record.is_empty() {
            parts.push(format!("no record from rank(s) {}", list(no_record)));
        }
        if !no_receipt.is_empty() {
            parts.push(format!("no receipt from rank(s) {}", list(no_receipt)));
        }
        parts.join("; ")
    }
}

/// Runs one node's exchange on `sock` with the peers at `addrs` (by rank; the source address
/// a peer's datagrams must come from). `mine` holds this node's record for every peer.
pub fn exchange(
    sock: &UdpSocket,
    addrs: &[SocketAddr],
    mine: &[ConnInfo],
    cfg: &PeerConfig,
) -> Result<PeerReport, String> {
    let (n, me) = (cfg.n as usize, cfg.rank);
    if addrs.len() != n || me >= cfg.n {
        return Err(format!("rank {me} of {n} with an address table of {}", addrs.len()));
    }
    let mut by_peer = vec![None; n];
    for c in mine {
        if c.from != me || c.to >= cfg.n || c.to == me || by_peer[c.to as usize].replace(*c).is_some() {
            return Err(format!("rank {me} was handed a wrong record of its own: {c:?}"));
        }
    }
    if by_peer.iter().flatten().count() != n - 1 {
        return Err(format!("rank {me} lacks a record for some peer"));
    }
    let mut node = Node {
        cfg,
        sock,
        addrs,
        mine: by_peer,
        theirs: vec![None; n],
        confirmed: vec![false; n],
        attempts: 0,
        rep: PeerReport {
            theirs: Vec::new(),
            sent: 0,
            received: 0,
            dropped: 0,
            injected_losses: 0,
        },
        problem: None,
    };
    let mut buf = vec![0u8; 2048];
    let deadline = Instant::now() + cfg.timeout;
    let mut pause = FIRST_PAUSE;
    let mut next_send = Instant::now();
    while !(0..n).all(|p| node.done_with(p)) {
        let now = Instant::now();
        if now > deadline {
            return Err(format!(
                "verbs connection data peer to peer: rank {me} after {:?}: {}{}",
                cfg.timeout,
                node.missing(),
                node.problem
                    .map(|e| format!(" (last problem: {e})"))
                    .unwrap_or_default()
            ));
        }
        if now >= next_send {
            for p in 0..n {
                if !node.done_with(p) {
                    node.send(p);
                }
            }
            next_send = now + pause;
            pause = (pause * 2).min(LAST_PAUSE);
        }
        node.receive(&mut buf, next_send.min(deadline).saturating_duration_since(now))?;
    }
    let end = Instant::now() + cfg.linger;
    while let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        // Done: a contradiction now cannot change what this node connects with.
        if node.receive(&mut buf, left).is_err() {
            node.rep.dropped += 1;
        }
    }
    node.rep.theirs = node.theirs;
    Ok(node.rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::conn;

    const JOB: u64 = 0xF7C0_0000_0000_0011;

    fn cfg(rank: u32, n: u32) -> PeerConfig {
        PeerConfig {
            rank,
            n,
            job: JOB,
            max_msg: crate::transport::MAX_PAYLOAD as u32,
            timeout: Duration::from_secs(10),
            linger: Duration::from_millis(300),
            drop_every: 0,
            key: Some(AuthKey::from_bytes([7; 16])),
        }
    }

    fn records(rank: u32, n: u32) -> Vec<ConnInfo> {
        (0..n)
            .filter(|&t| t != rank)
            .map(|t| conn::sample(JOB, rank, t))
            .collect()
    }

    /// `n` ranks as threads on loopback, each configured by `adjust`.
    fn run(n: u32, adjust: impl Fn(&mut PeerConfig)) -> Vec<Result<PeerReport, String>> {
        let socks: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let addrs: Vec<SocketAddr> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
        let hs: Vec<_> = socks
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                let (addrs, mut c) = (addrs.clone(), cfg(r as u32, n));
                adjust(&mut c);
                std::thread::spawn(move || exchange(&s, &addrs, &records(r as u32, n), &c))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    }

    fn assert_all_got_theirs(out: &[Result<PeerReport, String>]) {
        let n = out.len() as u32;
        for (r, o) in out.iter().enumerate() {
            let rep = o.as_ref().unwrap();
            for f in 0..n {
                let want = (f != r as u32).then(|| conn::sample(JOB, f, r as u32));
                assert_eq!(rep.theirs[f as usize], want, "rank {r} from {f}");
            }
        }
    }

    #[test]
    fn every_rank_gets_the_record_each_peer_made_for_it() {
        for n in [2, 5, 17] {
            let out = run(n, |_| {});
            assert_all_got_theirs(&out);
            for o in &out {
                assert_eq!(o.as_ref().unwrap().dropped, 0);
            }
        }
    }

    #[test]
    fn lost_datagrams_are_sent_again() {
        for (n, k) in [(2, 2), (5, 3), (17, 4)] {
            let out = run(n, |c| c.drop_every = k);
            assert_all_got_theirs(&out);
            assert!(out.iter().all(|o| o.as_ref().unwrap().injected_losses > 0));
        }
    }

    /// As `bench --boot --transport verbs` does it: the bootstrap's own sockets, right after
    /// the boot (late boot datagrams among the records), with losses in both phases.
    #[test]
    fn after_a_lossy_boot_on_the_kept_sockets() {
        fn boot_then_swap(s: UdpSocket, c: crate::runtime::bootstrap::BootConfig) -> Result<PeerReport, String> {
            let (rank, n, drop_every) = (c.rank, c.n, c.drop_every);
            let b = crate::runtime::bootstrap::boot_keep(s, c)?;
            let addrs: Vec<SocketAddr> = b.addrs.iter().map(|&a| SocketAddr::V4(a)).collect();
            let pc = PeerConfig {
                drop_every,
                key: None,
                ..cfg(rank, n)
            };
            exchange(&b.sock, &addrs, &records(rank, n), &pc)
        }
        let (_, out) = crate::runtime::bootstrap::loopback_threads(9, |c| c.drop_every = 5, boot_then_swap);
        assert_all_got_theirs(&out);
    }

    #[test]
    fn a_foreign_key_is_shut_out_and_named_as_missing() {
        let out = run(3, |c| {
            c.timeout = Duration::from_millis(600);
            c.linger = Duration::from_millis(50);
            if c.rank == 2 {
                c.key = Some(AuthKey::from_bytes([8; 16]));
            }
        });
        for o in &out[..2] {
            let e = o.as_ref().unwrap_err();
            assert!(
                e.contains("no record from rank(s) 2") && e.contains("no receipt from rank(s) 2"),
                "{e}"
            );
            assert!(e.contains("last problem"), "{e}");
        }
        let e = out[2].as_ref().unwrap_err();
        assert!(e.contains("no record from rank(s) 0, 1"), "{e}");
    }

    #[test]
    fn a_contradicting_repeat_is_a_named_error_and_a_misaddressed_one_is_dropped() {
        let (a, b) = (
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        );
        let addrs = vec![a.local_addr().unwrap(), b.local_addr().unwrap()];
        let key = cfg(0, 2).key;
        let send = |info: &ConnInfo| {
            let d = sealed(key.as_ref(), &conn_relay::encode_peer(JOB, 2, info, PEER_NEED));
            b.send_to(&d, addrs[0]).unwrap();
        };
        send(&conn::sample(JOB, 1, 0));
        send(&ConnInfo {
            qpn: 4242,
            ..conn::sample(JOB, 1, 0)
        });
        let e = exchange(&a, &addrs, &records(0, 2), &cfg(0, 2)).unwrap_err();
        assert!(
            e.contains("rank 1 sent rank 0 a connection record contradicting"),
            "{e}"
        );

        // From an address other than the table's: dropped, counted, and the peer still missing.
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        let d = sealed(
            key.as_ref(),
            &conn_relay::encode_peer(JOB, 2, &conn::sample(JOB, 1, 0), 0),
        );
        c.send_to(&d, addrs[0]).unwrap();
        let short = PeerConfig {
            timeout: Duration::from_millis(200),
            ..cfg(0, 2)
        };
        let e = exchange(&a, &addrs, &records(0, 2), &short).unwrap_err();
        assert!(
            e.contains("no record from rank(s) 1") && e.contains("not meant for rank 0"),
            "{e}"
        );
    }
}
