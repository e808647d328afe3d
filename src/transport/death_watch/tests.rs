use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

/// A directory of this test's own, removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("ftcoll-death-watch-{}-{i}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn board(n: u32) -> (Dir, std::path::PathBuf) {
    let dir = Dir::new();
    let path = dir.path().join("board");
    DeathBoard::create(&path, n).unwrap();
    (dir, path)
}

/// What `watch` is told within `wait`, or as soon as `want` came.
fn told_within(watch: &mut DeathWatch, want: usize, wait: Duration) -> Vec<u32> {
    let mut seen = Vec::new();
    let t0 = Instant::now();
    loop {
        watch.take(|r| seen.push(r));
        if seen.len() >= want || t0.elapsed() >= wait {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Rank 0 held by a thread of its own, which then either ends holding it (`leave`: false)
/// or leaves; ranks 1 and 2 (held by this thread) watch it. Returns what each watch was
/// told.
fn watch_rank_0(leave: bool) -> Vec<Vec<u32>> {
    let (_dir, path) = board(3);
    let (held_tx, held_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let p = path.clone();
    let owner = std::thread::spawn(move || {
        let b = DeathBoard::open(&p, 3).unwrap();
        let held = b.hold(0).unwrap();
        held_tx.send(()).unwrap();
        end_rx.recv().unwrap();
        if leave {
            held.leave();
        } else {
            // Ends with the mutex held: the kernel's robust list, as for a killed process.
            std::mem::forget(held);
        }
    });
    held_rx.recv().unwrap();
    let b = DeathBoard::open(&path, 3).unwrap();
    let mine: Vec<Held> = (1..3).map(|r| b.hold(r).unwrap()).collect();
    let mut watches: Vec<DeathWatch> = (1..3).map(|me| DeathWatch::new(b.clone(), me)).collect();
    for w in &mut watches {
        let early = told_within(w, 1, Duration::ZERO);
        assert!(early.is_empty(), "told before anything happened: {early:?}");
    }
    end_tx.send(()).unwrap();
    owner.join().unwrap();
    let told = watches
        .iter_mut()
        .map(|w| {
            // The owner has ended: whatever its word says is there now.
            let mut seen = told_within(w, 1, Duration::ZERO);
            seen.extend(told_within(w, 1, Duration::ZERO));
            seen
        })
        .collect();
    for h in mine {
        h.leave();
    }
    told
}

/// A holder that ends without leaving is a death, told once to every watch (and the
/// watches' own ranks, held and left at the end, never are).
#[test]
fn a_holder_that_ends_holding_is_told_dead_to_every_watch_once() {
    assert_eq!(watch_rank_0(false), vec![vec![0], vec![0]]);
}

/// A holder that leaves is no death.
#[test]
fn a_holder_that_leaves_is_not_told() {
    assert_eq!(watch_rank_0(true), vec![Vec::<u32>::new(), Vec::new()]);
}

/// A rank never held (its process not started) is no death either.
#[test]
fn a_rank_not_held_is_not_told() {
    let (_dir, path) = board(2);
    let b = DeathBoard::open(&path, 2).unwrap();
    let _me = b.hold(1).unwrap();
    let mut w = DeathWatch::new(b, 1);
    assert!(told_within(&mut w, 1, Duration::from_millis(5)).is_empty());
}

/// A SIGKILLed process's death is told: the child is this test binary re-run as a holder of
/// rank 0 that says so in a file and sleeps.
#[test]
fn a_sigkilled_holder_is_told_dead() {
    const CHILD: &str = "FTCOLL_DEATH_WATCH_CHILD";
    if let Ok(path) = std::env::var(CHILD) {
        let b = DeathBoard::open(Path::new(&path), 2).unwrap();
        let _held = b.hold(0).unwrap();
        std::fs::write(format!("{path}.held"), b"").unwrap();
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    /// Kills the child however the test ends.
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let (_dir, path) = board(2);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "transport::death_watch::tests::a_sigkilled_holder_is_told_dead",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    // The child makes a file once it holds rank 0.
    let held = format!("{}.held", path.display());
    let t0 = Instant::now();
    loop {
        if std::path::Path::new(&held).exists() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            panic!("the child did not start");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let b = DeathBoard::open(&path, 2).unwrap();
    let _me = b.hold(1).unwrap();
    let mut w = DeathWatch::new(b, 1);
    assert!(told_within(&mut w, 1, Duration::ZERO).is_empty(), "alive");
    // SAFETY: kill(2) of our own child's pid.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGKILL) };
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while seen.is_empty() && t0.elapsed() < Duration::from_secs(10) {
        w.take(|r| seen.push(r));
    }
    child.0.wait().unwrap();
    assert_eq!(seen, vec![0], "the killed holder");
}

/// A file that is not a board of that size is refused, as are sizes out of range.
#[test]
fn open_refuses_what_is_not_a_board() {
    let (dir, path) = board(4);
    assert!(DeathBoard::open(&path, 5).is_err());
    assert!(DeathBoard::open(&path, 4).is_ok());
    let other = dir.path().join("other");
    std::fs::write(&other, vec![0u8; file_len(4)]).unwrap();
    let e = DeathBoard::open(&other, 4).err().expect("zeros are no board");
    assert!(e.to_string().contains("not a death board"), "{e}");
    assert!(DeathBoard::create(&dir.path().join("one"), 1).is_err());
    assert!(DeathBoard::create(&dir.path().join("big"), MAX_RANKS + 1).is_err());
    assert!(DeathBoard::create(&path, 4).is_err(), "never over an existing file");
    assert!(DeathBoard::open(&path, 4).unwrap().hold(4).is_err());
    // A rank held already (a board used twice) is refused, not waited for.
    let b = DeathBoard::open(&path, 4).unwrap();
    let _one = b.hold(1).unwrap();
    let e = std::thread::scope(|s| s.spawn(|| b.hold(1).err()).join().unwrap()).expect("held twice");
    assert!(e.to_string().contains("held by another"), "{e}");
}

/// In a board of more than [`SCAN`] ranks a take reads [`SCAN`] of them in turn: a death is
/// told within a round of takes, once.
#[test]
fn a_large_board_is_read_a_few_ranks_per_take() {
    let n = 2 * SCAN + 8;
    let (_dir, path) = board(n);
    let p = path.clone();
    std::thread::spawn(move || {
        let b = DeathBoard::open(&p, n).unwrap();
        std::mem::forget(b.hold(n - 3).unwrap());
    })
    .join()
    .unwrap();
    let b = DeathBoard::open(&path, n).unwrap();
    let _me = b.hold(0).unwrap();
    let mut w = DeathWatch::new(b, 0);
    let mut seen = Vec::new();
    let mut takes = 0;
    while seen.is_empty() && takes < 10 {
        w.take(|r| seen.push(r));
        takes += 1;
    }
    assert_eq!(seen, vec![n - 3]);
    assert_eq!(
        takes,
        n.div_ceil(SCAN),
        "the dead rank is in the last scan of the first round"
    );
    for _ in 0..10 {
        w.take(|r| seen.push(r));
    }
    assert_eq!(seen, vec![n - 3], "told once");
}
