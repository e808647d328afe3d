//! The coordinator's side of the control channel.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{challenge_key, hello_key, wait_readable};
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::conn_relay::Gather;
use crate::wire::conn::ConnInfo;
use crate::wire::conn_relay::{self, Dir};
use crate::wire::control::{Msg, decode, encode};
use crate::wire::join::{self, JobParams};
use crate::wire::mac::AuthKey;
use crate::wire::mac::{opened, sealed};
use crate::wire::shape::{self, GroupShape};

/// The parent's side: turns reports into board entries for the coordinator and sends its
/// commands.
pub struct ParentAgent {
    sock: UdpSocket,
    job: u64,
    children: Vec<Option<SocketAddr>>,
    sent_allowed: u64,
    sent_retired: u64,
    last_flush: Instant,
    /// Per child: parent clock − child clock and its uncertainty (ns), once measured.
    pub clocks: Vec<Option<(i64, u64)>>,
    /// Per child: its data address, when it joined through this agent (`--join`).
    addrs: Vec<Option<SocketAddr>>,
    /// Per child: when it was last heard from.
    last_seen: Vec<Option<Instant>>,
    /// The parameters handed out with the address table; no table before they are set.
    params: Option<JobParams>,
    /// The job key: every control datagram carries its MAC.
    key: Option<AuthKey>,
    /// Per rank: the verbs connection data it made, as relayed so far ([`conn_relay`];
    /// allocated with the first chunk, so runs without verbs pay nothing).
    conns: Vec<Option<Gather>>,
    /// Ranks whose connection data is complete.
    conns_done: usize,
    /// A launched run's handshake ([`ParentAgent::launch`]); `None`: every datagram is sealed
    /// with `key` alone (a `--procs` run, whose key is already the run's session key).
    launch: Option<Launch>,
    /// Datagrams dropped as invalid (a bad tag, a bad field, a message out of place).
    pub invalid: u64,
    /// Hellos ([`Msg::Join`]) refused: not sealed with this run's hello key (recorded in
    /// another run, or forged); counted apart from [`ParentAgent::invalid`].
    pub refused_hellos: u64,
    /// What every joining member must share with this group (its fingerprint, and the
    /// refusal that names it); `None`: any hello is admitted.
    shape: Option<(u64, GroupShape)>,
    /// Hellos refused because they stated another shape; the last such rank.
    pub refused_shapes: u64,
    pub last_refused: Option<u32>,
    /// The last address sends the table to every child that joined, at once
    /// ([`ParentAgent::set_table_to_all`]); otherwise each child gets it at its next hello.
    table_to_all: bool,
}

/// What a launched run's coordinator challenges its nodes with.
struct Launch {
    /// The job's long-term key: knocks are sealed with it.
    long_term: Option<AuthKey>,
    /// This coordinator's fresh challenge nonce.
    nonce: [u8; 16],
    /// The run's nonce.
    run: [u8; 16],
    /// The key hellos are sealed with ([`hello_key`]).
    hello: Option<AuthKey>,
}

/// Which key opened a datagram.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Under {
    /// The run's key (`key`).
    Session,
    /// The hello key of a launched run.
    Hello,
    /// The job's long-term key (a launched run's knocks).
    LongTerm,
}

impl ParentAgent {
    /// Binds the control socket on 127.0.0.1; `addr()` is passed to the children.
    pub fn new(job: u64, n: u32) -> std::io::Result<Self> {
        Self::bind("127.0.0.1:0".parse().expect("literal address"), job, n)
    }

    /// Binds the control socket at `addr` (rank 0's `--join` address in a launched run).
    pub fn bind(addr: SocketAddr, job: u64, n: u32) -> std::io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            job,
            children: vec![None; n as usize],
            sent_allowed: 0,
            sent_retired: 0,
            last_flush: Instant::now(),
            clocks: vec![None; n as usize],
            addrs: vec![None; n as usize],
            last_seen: vec![None; n as usize],
            params: None,
            key: None,
            conns: vec![None; n as usize],
            conns_done: 0,
            launch: None,
            invalid: 0,
            refused_hellos: 0,
            shape: None,
            refused_shapes: 0,
            last_refused: None,
            table_to_all: false,
        })
    }

    /// Takes a chunk of verbs connection data from rank `r` at `from`; once every rank's is in,
    /// answers a rank's first chunk with the records addressed to it (the rank repeats its
    /// chunks until it has them all, so lost answers are made good).
    fn relay_conns(&mut self, chunk: &conn_relay::Chunk, from: SocketAddr) {
        let n = self.conns.len() as u32;
        let r = chunk.rank as usize;
        if chunk.dir != Dir::Up {
            self.invalid += 1;
            return;
        }
        let g = self.conns[r].get_or_insert_with(|| Gather::new(r as u32, n, Dir::Up));
        let was = g.missing();
        if g.add(chunk).is_err() {
            self.invalid += 1;
            return;
        }
        if was > 0 && g.missing() == 0 {
            self.conns_done += 1;
        }
        if chunk.part != 0 || self.conns_done < n as usize {
            return;
        }
        let down: Vec<ConnInfo> = self
            .conns
            .iter()
            .filter_map(|g| g.as_ref()?.get(r as u32).copied())
            .collect();
        for d in conn_relay::encode_all(self.job, n, Dir::Down, r as u32, &down) {
            let _ = self.sock.send_to(&sealed(self.key.as_ref(), &d), from);
        }
    }

    /// How many ranks have sent all their verbs connection data.
    pub fn conns_complete(&self) -> usize {
        self.conns_done
    }

    /// How many children have sent their data address.
    pub fn addresses_known(&self) -> usize {
        self.addrs.iter().filter(|a| a.is_some()).count()
    }

    /// Seals every control datagram with `key` and accepts only those it seals (`None`: the
    /// run is unauthenticated; tags are then zero).
    pub fn set_key(&mut self, key: Option<AuthKey>) {
        self.key = key;
    }

    /// Admits only joins that state `shape`'s fingerprint ([`Msg::Join`]): another is not
    /// entered in the table, is counted ([`ParentAgent::refused_shapes`]) and is answered with
    /// a refusal that carries `shape` ([`shape::encode_refusal`]).
    pub fn set_shape(&mut self, shape: Option<GroupShape>) {
        self.shape = shape.map(|s| (s.fingerprint(), s));
    }

    /// From now on, answers every join with the address table and `p`.
    pub fn set_params(&mut self, p: JobParams) {
        self.params = Some(p);
    }

    /// A launched run: the key given to [`ParentAgent::set_key`] is the job's long-term key,
    /// nodes join by the challenge–response of [`super`] (a fresh challenge nonce drawn here,
    /// and the run's nonce `p.run`), and every later datagram, both ways, is sealed with the
    /// run's session key `long_term.session(p.run)`. Every hello is answered with the
    /// address table and `p`.
    pub fn launch(&mut self, p: JobParams) -> std::io::Result<()> {
        let long_term = match self.launch.take() {
            Some(l) => l.long_term,
            None => self.key.take(),
        };
        let nonce = crate::transport::udp::auth::fresh_nonce()?;
        self.key = long_term.as_ref().map(|k| k.session(&p.run));
        self.launch = Some(Launch {
            hello: hello_key(long_term.as_ref(), &nonce, &p.run),
            long_term,
            nonce,
            run: p.run,
        });
        self.params = Some(p);
        Ok(())
    }

    /// The body of datagram `d` and the key that opened it.
    fn open<'a>(&self, d: &'a [u8]) -> Option<(&'a [u8], Under)> {
        if let Some(b) = opened(self.key.as_ref(), d) {
            return Some((b, Under::Session));
        }
        let l = self.launch.as_ref()?;
        if let Some(b) = opened(l.hello.as_ref(), d) {
            return Some((b, Under::Hello));
        }
        opened(l.long_term.as_ref(), d).map(|b| (b, Under::LongTerm))
    }

    /// Whether message `m`, opened `under` a key, is in its place: in a launched run with a
    /// key, a knock under the long-term key, a hello under the hello key, anything else
    /// under the session key; without a launch, no knock.
    fn in_place(&self, under: Under, m: &Msg) -> bool {
        let want = match (self.launch.as_ref(), m) {
            (None, Msg::Knock { .. }) => return false,
            (None, _) => Under::Session,
            (Some(l), _) if l.long_term.is_none() => return true,
            (Some(_), Msg::Knock { .. }) => Under::LongTerm,
            (Some(_), Msg::Join { .. }) => Under::Hello,
            _ => Under::Session,
        };
        under == want
    }

    /// Counts a datagram refused: a hello (a control `Join` of this job, as far as its
    /// unverified body says) apart from the rest.
    fn refuse(&mut self, d: &[u8]) {
        let n = self.children.len() as u32;
        let body = &d[..d.len().saturating_sub(crate::wire::mac::TAG_LEN)];
        if matches!(decode(body, self.job, n), Some((_, Msg::Join { .. }))) {
            self.refused_hellos += 1;
        } else {
            self.invalid += 1;
        }
    }

    /// Sends the whole address table to `to` (nothing while an address or the parameters are
    /// missing: the child keeps asking).
    fn send_table(&self, to: SocketAddr) {
        let Some(p) = self.params else { return };
        let Some(addrs) = self.addrs.iter().copied().collect::<Option<Vec<_>>>() else {
            return;
        };
        let n = addrs.len() as u32;
        for (i, chunk) in addrs.chunks(join::PER_DATAGRAM).enumerate() {
            let first = (i * join::PER_DATAGRAM) as u32;
            let table = join::encode(self.job, n, first, chunk, &p);
            let _ = self.sock.send_to(&sealed(self.key.as_ref(), &table), to);
        }
    }

    /// Sends the table to every child that joined as soon as the last address comes in, not
    /// at each child's next hello (up to 5 ms later, or never if this coordinator is gone by
    /// then: a group's rank 0 that leaves as soon as it joined). Off by default: the burst is
    /// children × ⌈n / 56⌉ datagrams at once, which a bench coordinator does not need.
    pub fn set_table_to_all(&mut self, on: bool) {
        self.table_to_all = on;
    }

    /// Has every child's data address come in?
    fn table_complete(&self) -> bool {
        self.addrs.iter().all(Option::is_some)
    }

    /// The rendezvous ends (its coordinator leaves: [`crate::group::Member`]'s rank 0): every
    /// child that joined gets the whole table a few more times, if it is complete (its copy
    /// may have been lost), then [`Msg::Stop`], a few times too (a child that has the whole
    /// table has returned and reads no STOP; one that lost a chunk of every copy, or the
    /// STOP, is still told). A child still waiting for the table then fails at once
    /// and says why ([`ChildAgent::join`](super::ChildAgent::join)), rather than at its
    /// timeout; one still timing its clock against this coordinator stops probing
    /// ([`ChildAgent::sync_clock`](super::ChildAgent::sync_clock)) rather than wait out ten
    /// probes' silence.
    pub fn farewell(&self) {
        const COPIES: usize = 3;
        if self.table_complete() {
            for _ in 0..COPIES {
                for a in self.children.iter().flatten() {
                    self.send_table(*a);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for _ in 0..COPIES {
            self.stop();
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The control address.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Sleeps until a control datagram arrives or `timeout` passed (while nothing else needs
    /// this thread: joining, clock probes).
    pub fn wait(&self, timeout: Duration) {
        wait_readable(&self.sock, timeout);
    }

    /// The harness's own failure detector for crashes it did not cause (a host killed or cut
    /// off from outside): a child that has been silent for `silence` — children repeat their
    /// reports every 2 ms — is marked dead in the operation the root may currently start, so
    /// that operations stop waiting for its reports. Returns the ranks newly marked.
    pub fn mark_silent_dead(&self, ctl: &Control, silence: Duration) -> Vec<u32> {
        let mut out = Vec::new();
        for (r, seen) in self.last_seen.iter().enumerate() {
            let b = &ctl.boards[r];
            if let Some(t) = seen
                && t.elapsed() > silence
                && !b.dead.load(Ordering::Acquire)
            {
                let iter = ctl.allowed.load(Ordering::Acquire).saturating_sub(1);
                b.died_in.store(iter, Ordering::Relaxed);
                b.dead.store(true, Ordering::Release);
                out.push(r as u32);
            }
        }
        out
    }

    /// How many children have made contact.
    pub fn joined(&self) -> usize {
        self.children.iter().filter(|c| c.is_some()).count()
    }

    fn send_to(&self, r: usize, m: &Msg) {
        if let Some(a) = self.children[r] {
            let _ = self
                .sock
                .send_to(&sealed(self.key.as_ref(), &encode(self.job, 0, m)), a);
        }
    }

    /// Tells every child to exit.
    pub fn stop(&self) {
        for r in 0..self.children.len() {
            self.send_to(r, &Msg::Stop);
        }
    }

    /// Receives reports into `ctl` (timestamps moved to the parent's clock) and sends commands
    /// that changed (and periodically). `now_ns` is the parent's clock.
    pub fn pump(&mut self, ctl: &Control, now_ns: &dyn Fn() -> u64) {
        self.serve(ctl, now_ns);
        self.command(ctl);
    }

    /// Receives and answers what came (knocks, joins with the table, clock probes; reports
    /// into `ctl`) and sends no command: a rendezvous only ([`crate::group::Member`]'s rank 0,
    /// whose members read nothing more from the control plane once they have the table: a
    /// command to a member that died would only draw ICMP errors toward this host).
    pub fn serve(&mut self, ctl: &Control, now_ns: &dyn Fn() -> u64) {
        let n = self.children.len() as u32;
        let mut buf = [0u8; 2048];
        while let Ok((len, from)) = self.sock.recv_from(&mut buf) {
            let Some((body, under)) = self.open(&buf[..len]) else {
                self.refuse(&buf[..len]);
                continue;
            };
            if conn_relay::is_chunk(body) {
                if !self.in_place(under, &Msg::Hello) {
                    self.invalid += 1;
                    continue;
                }
                // The sender's rank is in the chunk; it must come from that rank's address.
                match conn_relay::decode(body, self.job, n, crate::transport::MAX_PAYLOAD as u32) {
                    Ok(c) if self.children[c.rank as usize].is_none_or(|a| a == from) => {
                        let r = c.rank as usize;
                        self.children[r] = Some(from);
                        self.last_seen[r] = Some(Instant::now());
                        self.relay_conns(&c, from);
                    }
                    _ => self.invalid += 1,
                }
                continue;
            }
            let Some((rank, m)) = decode(body, self.job, n) else {
                self.invalid += 1;
                continue;
            };
            if !self.in_place(under, &m) {
                if matches!(m, Msg::Join { .. }) {
                    self.refused_hellos += 1;
                } else {
                    self.invalid += 1;
                }
                continue;
            }
            if let Msg::Knock { nonce } = m {
                // Changes nothing here: draws the challenge, sealed over the knock's nonce.
                if let Some(l) = &self.launch {
                    let c = encode(
                        self.job,
                        0,
                        &Msg::Challenge {
                            nonce: l.nonce,
                            run: l.run,
                        },
                    );
                    let k = challenge_key(l.long_term.as_ref(), &nonce);
                    let _ = self.sock.send_to(&sealed(k.as_ref(), &c), from);
                }
                continue;
            }
            if let (Msg::Join { shape: theirs, .. }, Some((mine, ours))) = (m, &self.shape)
                && theirs != *mine
            {
                // Another group's member, or one built with other parameters: not admitted
                // (it would decode none of the others' datagrams); told why, with ours.
                self.refused_shapes += 1;
                self.last_refused = Some(rank);
                let refusal = shape::encode_refusal(self.job, rank, ours);
                let _ = self.sock.send_to(&sealed(self.key.as_ref(), &refusal), from);
                continue;
            }
            let r = rank as usize;
            match self.children[r] {
                None => self.children[r] = Some(from),
                Some(a) if a != from => {
                    self.invalid += 1;
                    continue;
                }
                Some(_) => {}
            }
            self.last_seen[r] = Some(Instant::now());
            match m {
                Msg::Report {
                    seq,
                    delivered_ns,
                    last_ns,
                    started_ns,
                    sent,
                    deliveries,
                    bad,
                    finished,
                    dropped,
                } => {
                    if seq < ctl.retired.load(Ordering::Acquire) {
                        continue;
                    }
                    let b = ctl.boards[r].claim(seq);
                    b.last_ns.store(last_ns, Ordering::Relaxed);
                    b.sent.store(sent, Ordering::Relaxed);
                    b.deliveries.store(u32::from(deliveries), Ordering::Relaxed);
                    b.bad_payload.store(u32::from(bad), Ordering::Relaxed);
                    b.send_drops.store(u32::from(dropped), Ordering::Relaxed);
                    // Last, releasing the rest: the coordinator reads the report from the time
                    // on (`Coordinator::tick`), as a node thread's own stamps.
                    b.delivered_ns.store(delivered_ns, Ordering::Release);
                    if started_ns != 0 {
                        ctl.started_ns[(seq % WINDOW as u64) as usize].store(started_ns, Ordering::Release);
                    }
                    b.finished.store(finished, Ordering::Release);
                }
                Msg::Dead { iter } => {
                    let b = &ctl.boards[r];
                    if !b.dead.load(Ordering::Acquire) {
                        b.died_in.store(iter, Ordering::Relaxed);
                        b.dead.store(true, Ordering::Release);
                    }
                }
                Msg::Hello => {}
                Msg::Ping { t1 } => {
                    let pong = encode(self.job, 0, &Msg::Pong { t1, t2: now_ns() });
                    let _ = self.sock.send_to(&sealed(self.key.as_ref(), &pong), from);
                }
                Msg::Clock { offset, uncertainty } => self.clocks[r] = Some((offset, uncertainty)),
                Msg::Join { addr, .. } => {
                    let complete = self.table_complete();
                    self.addrs[r] = Some(addr);
                    if self.table_to_all && !complete && self.table_complete() {
                        // The last address: every child that joined gets the table now
                        // ([`ParentAgent::set_table_to_all`]).
                        for a in self.children.iter().flatten() {
                            self.send_table(*a);
                        }
                    } else {
                        self.send_table(from);
                    }
                }
                _ => self.invalid += 1,
            }
        }
    }

    /// Sends the commands that changed (and all of them every 2 ms).
    fn command(&mut self, ctl: &Control) {
        let allowed = ctl.allowed.load(Ordering::Acquire);
        let retired = ctl.retired.load(Ordering::Acquire);
        let periodic = self.last_flush.elapsed() > Duration::from_millis(2);
        if periodic {
            self.last_flush = Instant::now();
        }
        if allowed != self.sent_allowed || periodic {
            self.send_to(0, &Msg::Allow { allowed });
            self.sent_allowed = allowed;
        }
        if retired != self.sent_retired || periodic {
            for r in 0..self.children.len() {
                self.send_to(r, &Msg::Retire { retired });
            }
            self.sent_retired = retired;
        }
    }
}
