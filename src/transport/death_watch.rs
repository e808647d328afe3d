//! A process's death on this host, seen before its socket closes: every node process of a
//! local launch holds a robust, process-shared mutex in a file all of them map (a
//! [`DeathBoard`]). When a process dies, however it dies (`SIGKILL` included), the kernel
//! walks its threads' robust-futex lists in `exit_mm`, *before* it unmaps the process's
//! memory and closes its files, and marks each mutex's futex word owner-dead
//! (`FUTEX_OWNER_DIED`; `pthread_mutexattr_setrobust(3)`, the kernel's
//! `Documentation/locking/robust-futex-ABI.rst`). The peers read that word where they poll
//! ([`DeathWatch::take`]); no thread of theirs has to be woken and scheduled (one blocked
//! waiter per peer, tried first, told later than the ICMP refusal on two shared cores:
//! docs/measurements.md, "Deaths on this host"). The ICMP refusal of the closed port
//! (`transport/udp/icmp.rs`) comes only after the memory is gone ("The port closes first", "A
//! lean node process dies sooner"), a heartbeat timeout later still.
//!
//! The evidence is the kernel's and cannot be forged by a datagram, but it is only a
//! *process's* (its holding thread's) death: a process that leaves sets its `left` flag
//! first ([`Held::leave`], also on drop) and unlocks. The UDP transport takes each death
//! in its `poll` as a suspicion ([`Delivery::Suspect`], counted in
//! `TransportStats::died_on_host`).
//!
//! The futex word is the mutex's first 32 bits in glibc's layout; [`DeathBoard::hold`]
//! checks that it holds the holder's thread id once locked and refuses the board otherwise
//! (another C library: the launch runs without it). Layout of the file: a header (magic,
//! `n`), per rank a `held` and a `left` word, then the `n` mutexes.
//!
//! [`Delivery::Suspect`]: crate::transport::Delivery::Suspect

use std::fs::{File, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The most ranks a board holds (a watcher reads every other rank's word per scan).
pub const MAX_RANKS: u32 = 1024;

const MAGIC: u64 = 0x6674_636f_6c6c_6462; // "ftcolldb"
const HEADER: usize = 64;
/// The kernel's mark of a robust futex whose owner died.
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
/// The owner's thread id in a robust futex word.
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;

fn stride() -> usize {
    size_of::<libc::pthread_mutex_t>().next_multiple_of(8)
}

fn flags_len(n: u32) -> usize {
    (2 * n as usize * size_of::<AtomicU32>()).next_multiple_of(64)
}

fn file_len(n: u32) -> usize {
    HEADER + flags_len(n) + n as usize * stride()
}

/// One mapping of a board file.
pub struct DeathBoard {
    base: *mut u8,
    len: usize,
    n: u32,
}

// SAFETY: the mapping is shared memory that every access goes through atomics or the
// process-shared mutexes (which are made for concurrent use); the pointer is only
// dereferenced within `len`, and the mapping lives until `Drop`.
unsafe impl Send for DeathBoard {}
// SAFETY: as above: no access through `&DeathBoard` is unsynchronized.
unsafe impl Sync for DeathBoard {}

fn ranks_ok(n: u32) -> io::Result<()> {
    if (2..=MAX_RANKS).contains(&n) {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "a death board holds 2 to {MAX_RANKS} ranks, not {n}"
        )))
    }
}

impl DeathBoard {
    /// Creates the board file of `n` ranks at `path` (which must not exist) and initializes
    /// its mutexes: the launcher does this before it starts the processes.
    pub fn create(path: &Path, n: u32) -> io::Result<()> {
        ranks_ok(n)?;
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        file.set_len(file_len(n) as u64)?;
        let board = Self::map(&file, n)?;
        // SAFETY: `attr` is initialized by `pthread_mutexattr_init` before use and destroyed
        // after; every mutex lies within the mapping (`mutex` checks the rank), is not in use
        // yet (the file is new: no other process has it), and is initialized once.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            check(libc::pthread_mutexattr_init(&mut attr))?;
            check(libc::pthread_mutexattr_setpshared(
                &mut attr,
                libc::PTHREAD_PROCESS_SHARED,
            ))?;
            check(libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST))?;
            for r in 0..n {
                check(libc::pthread_mutex_init(board.mutex(r), &attr))?;
            }
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        board.header_n().store(u64::from(n), Ordering::Relaxed);
        board.magic().store(MAGIC, Ordering::Release);
        Ok(())
    }

    /// Maps the board file at `path`, made by [`DeathBoard::create`] for `n` ranks.
    pub fn open(path: &Path, n: u32) -> io::Result<Arc<Self>> {
        ranks_ok(n)?;
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len != file_len(n) as u64 {
            return Err(io::Error::other(format!(
                "{} is not a death board of {n} ranks ({len} bytes)",
                path.display()
            )));
        }
        let board = Self::map(&file, n)?;
        if board.magic().load(Ordering::Acquire) != MAGIC || board.header_n().load(Ordering::Relaxed) != u64::from(n) {
            return Err(io::Error::other(format!(
                "{} is not a death board of {n} ranks",
                path.display()
            )));
        }
        Ok(Arc::new(board))
    }

    fn map(file: &File, n: u32) -> io::Result<Self> {
        let len = file_len(n);
        // SAFETY: a shared read-write mapping of a file opened read-write, whose length was
        // checked or set to `len`; the result is checked before use. The file is the
        // launcher's own (created new in a private directory): nothing else truncates it
        // while it is mapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { base: p.cast(), len, n })
    }

    /// Ranks of the board.
    pub fn ranks(&self) -> u32 {
        self.n
    }

    fn magic(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of a page-aligned mapping of at least `HEADER` bytes, aligned for
        // a u64; the word is only accessed atomically.
        unsafe { &*self.base.cast::<AtomicU64>() }
    }

    fn header_n(&self) -> &AtomicU64 {
        // SAFETY: offset 8 of the mapping, within `HEADER`, aligned for a u64; atomic only.
        unsafe { &*self.base.add(8).cast::<AtomicU64>() }
    }

    /// Rank `r`'s `held` (`which` 0) or `left` (`which` 1) word.
    fn flag(&self, r: u32, which: usize) -> &AtomicU32 {
        assert!(r < self.n);
        let i = 2 * r as usize + which;
        // SAFETY: `i < 2n`, so the word lies in the flags region after the header, aligned
        // for a u32; the words are only accessed atomically.
        unsafe { &*self.base.add(HEADER + i * size_of::<AtomicU32>()).cast::<AtomicU32>() }
    }

    /// Rank `r`'s mutex.
    fn mutex(&self, r: u32) -> *mut libc::pthread_mutex_t {
        assert!(r < self.n);
        let off = HEADER + flags_len(self.n) + r as usize * stride();
        debug_assert!(off + size_of::<libc::pthread_mutex_t>() <= self.len);
        // SAFETY: `off` is within the mapping (checked rank, layout of `file_len`); the
        // pointer is only handed to the pthread mutex functions and read as `word`.
        unsafe { self.base.add(off).cast() }
    }

    /// Rank `r`'s futex word (glibc: the mutex's first 32 bits, checked by `hold`).
    fn word(&self, r: u32) -> &AtomicU32 {
        // SAFETY: the start of rank `r`'s mutex, within the mapping and aligned for a u32
        // (`stride` is a multiple of 8 after a 64-aligned region); the kernel and the C
        // library change it atomically, and it is only read atomically here.
        unsafe { &*self.mutex(r).cast::<AtomicU32>() }
    }

    /// Rank `r` holds its mutex from now on, on the calling thread (which must live as long
    /// as the process is a member: a robust mutex is its locking thread's). Its peers see
    /// the process's death at once, and nothing when it leaves ([`Held::leave`]).
    pub fn hold(self: &Arc<Self>, r: u32) -> io::Result<Held> {
        if r >= self.n {
            return Err(io::Error::other(format!(
                "rank {r} is not on a death board of {} ranks",
                self.n
            )));
        }
        let m = self.mutex(r);
        // SAFETY: an initialized process-shared robust mutex within the mapping. A try, not a
        // wait: rank `r`'s mutex is free on a fresh board, and one held (or left owner-dead)
        // means the board is used twice.
        match unsafe { libc::pthread_mutex_trylock(m) } {
            0 => {}
            libc::EOWNERDEAD => {
                // SAFETY: EOWNERDEAD hands this thread the mutex (and links it into this
                // thread's robust list): made consistent and unlocked, which unlinks it, before
                // the board may be unmapped.
                unsafe {
                    libc::pthread_mutex_consistent(m);
                    libc::pthread_mutex_unlock(m);
                }
                return Err(io::Error::other(format!(
                    "rank {r}'s mutex was held by a process that died: a board used twice"
                )));
            }
            libc::EBUSY => {
                return Err(io::Error::other(format!(
                    "rank {r} is held by another process: a board used twice"
                )));
            }
            e => return Err(io::Error::from_raw_os_error(e)),
        }
        let held = Held {
            board: self.clone(),
            rank: r,
            left: false,
            _thread: PhantomData,
        };
        if !self.kernel_marks(m) {
            // (`held` leaves on return: its peers read nothing of this rank.)
            return Err(io::Error::other(
                "the kernel would not mark this C library's mutex when its owner dies (its robust list does not hold it, or the mutex does not start with its futex word): no death board",
            ));
        }
        self.flag(r, 0).store(1, Ordering::Release);
        Ok(held)
    }
}

/// The kernel's robust-list head of a thread (`struct robust_list_head`,
/// `include/uapi/linux/futex.h`).
#[repr(C)]
struct RobustListHead {
    list: usize,
    futex_offset: libc::c_long,
    list_op_pending: usize,
}

impl DeathBoard {
    /// Whether the kernel marks mutex `m`, just locked by this thread, if this thread dies:
    /// the newest entry of this thread's robust list (`get_robust_list(2)`; glibc puts a
    /// robust mutex it locks at the list's head) plus the list's futex offset is `m`'s first
    /// word, which holds this thread's id. Without a robust list (a kernel or emulator
    /// without it), or another layout, nothing would ever be marked.
    fn kernel_marks(&self, m: *mut libc::pthread_mutex_t) -> bool {
        let mut head: *const RobustListHead = std::ptr::null();
        let mut len: libc::size_t = 0;
        // SAFETY: get_robust_list(2) for the calling thread (pid 0) writes a pointer and a
        // length into the two live locals passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_robust_list,
                0,
                &mut head as *mut *const RobustListHead,
                &mut len as *mut libc::size_t,
            )
        };
        if rc != 0 || head.is_null() || len != size_of::<RobustListHead>() {
            return false;
        }
        // SAFETY: the head the kernel registered for this thread, in this thread's own
        // memory (the C library's thread descriptor), alive while the thread is; read once.
        let h = unsafe { std::ptr::read_volatile(head) };
        let word = (h.list & !1).wrapping_add_signed(h.futex_offset as isize);
        // SAFETY: gettid(2) takes no argument and cannot fail.
        let tid = unsafe { libc::gettid() } as u32;
        // SAFETY: `m` is within the mapping and aligned for a u32 (see `word`).
        let own = unsafe { &*m.cast::<AtomicU32>() }.load(Ordering::Acquire) & FUTEX_TID_MASK;
        word == m as usize && own == tid & FUTEX_TID_MASK
    }
}

impl Drop for DeathBoard {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes; no reference into it outlives
        // `self` (every `Held` and `DeathWatch` holds an `Arc` of it).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn check(rc: i32) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// A rank's mutex, held by the thread that took it ([`DeathBoard::hold`]); not `Send`: a
/// robust mutex is its locking thread's. Dropping it leaves.
pub struct Held {
    board: Arc<DeathBoard>,
    rank: u32,
    left: bool,
    _thread: PhantomData<*const ()>,
}

impl Held {
    /// The process leaves: its peers see no death.
    pub fn leave(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if self.left {
            return;
        }
        self.left = true;
        self.board.flag(self.rank, 1).store(1, Ordering::Release);
        // SAFETY: this thread locked the mutex in `hold` (`Held` is not `Send`).
        unsafe { libc::pthread_mutex_unlock(self.board.mutex(self.rank)) };
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Ranks a [`DeathWatch::take`] reads at most: a poll of a node of a large launch reads a
/// few words, not one per rank (128 ranks: every 8th poll sees each).
pub const SCAN: u32 = 16;

/// One rank's view of the others' deaths: reads their futex words ([`DeathWatch::take`]).
pub struct DeathWatch {
    board: Arc<DeathBoard>,
    me: u32,
    /// Ranks already told.
    told: Vec<bool>,
    /// Where the next scan starts.
    next: u32,
}

impl DeathWatch {
    /// Rank `me`'s watch of the board's other ranks.
    pub fn new(board: Arc<DeathBoard>, me: u32) -> Self {
        let told = (0..board.n).map(|r| r == me).collect();
        Self {
            board,
            me,
            told,
            next: 0,
        }
    }

    /// Hands each rank whose process died (its mutex owner-dead, and it had not left) to `f`,
    /// once: a read of the words of the next [`SCAN`] ranks in turn (all of them in a board of
    /// at most `SCAN` ranks), in cache while nothing happens.
    #[inline]
    pub fn take(&mut self, mut f: impl FnMut(u32)) {
        let n = self.board.n;
        for _ in 0..n.min(SCAN) {
            let r = self.next;
            self.next = if r + 1 == n { 0 } else { r + 1 };
            if self.told[r as usize] {
                continue;
            }
            if self.board.word(r).load(Ordering::Acquire) & FUTEX_OWNER_DIED != 0
                && self.board.flag(r, 1).load(Ordering::Acquire) == 0
            {
                self.told[r as usize] = true;
                f(r);
            }
        }
    }

    /// This watch's rank.
    pub fn rank(&self) -> u32 {
        self.me
    }
}

/// One process's part in a board: its mutex, held on the thread that started it, and its
/// watch of the others ([`Watching::watch`], for the transport). Dropping it leaves.
pub struct Watching {
    board: Arc<DeathBoard>,
    rank: u32,
    _held: Held,
}

impl Watching {
    /// Rank `rank` of the board of `n` ranks at `path` holds its mutex on the calling thread
    /// (which must live as long as the process is a member).
    pub fn start(path: &Path, rank: u32, n: u32) -> io::Result<Self> {
        let board = DeathBoard::open(path, n)?;
        let held = board.hold(rank)?;
        Ok(Self {
            board,
            rank,
            _held: held,
        })
    }

    /// A watch of the others (for [`crate::transport::udp::UdpTransport::watch_deaths`]).
    pub fn watch(&self) -> DeathWatch {
        DeathWatch::new(self.board.clone(), self.rank)
    }
}

#[cfg(test)]
mod tests;
