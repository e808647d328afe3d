//! Connection data through the job's rendezvous directory (the bootstrap `ftcoll node
//! --rendezvous` uses for UDP addresses): rank R publishes `verbs-R.conn`, one `TO HEX` line per
//! peer (written then renamed, so readers never see half a file), and reads every other rank's
//! line addressed to it. Lines are [`ConnInfo`] and validated; another job's or a malformed file
//! is waited on (it may be a leftover being replaced) and named if it never becomes valid.

use std::path::Path;
use std::time::{Duration, Instant};

use super::conn::ConnInfo;

fn file(dir: &Path, rank: u32) -> std::path::PathBuf {
    dir.join(format!("verbs-{rank}.conn"))
}

/// Publishes what rank `rank` tells each peer.
pub fn publish(dir: &Path, rank: u32, infos: &[ConnInfo]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("rendezvous directory {}: {e}", dir.display()))?;
    let text: String = infos.iter().map(|c| format!("{} {}\n", c.to, c.to_hex())).collect();
    let tmp = dir.join(format!(".verbs-{rank}.conn.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file(dir, rank)).map_err(|e| format!("cannot publish in {}: {e}", dir.display()))
}

/// The line of `text` addressed to `me`, decoded.
fn parse(text: &str, from: u32, me: u32, n: u32, job: u64, max_msg: u32) -> Result<ConnInfo, String> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(me.to_string().as_str()))
        .ok_or_else(|| format!("no line for rank {me}"))?;
    let hex = line.split_whitespace().nth(1).unwrap_or("");
    let c = ConnInfo::from_hex(hex, job, me, n, max_msg).map_err(|e| e.to_string())?;
    if c.from != from {
        return Err(format!("claims to be from rank {}", c.from));
    }
    Ok(c)
}

/// Waits up to `timeout` for every other rank's connection data for `me`; indexed by rank
/// (`None` at `me`).
pub fn collect(
    dir: &Path,
    me: u32,
    n: u32,
    job: u64,
    max_msg: u32,
    timeout: Duration,
) -> Result<Vec<Option<ConnInfo>>, String> {
    let deadline = Instant::now() + timeout;
    let mut got: Vec<Option<ConnInfo>> = vec![None; n as usize];
    let mut last_err: Option<String> = None;
    loop {
        for r in (0..n).filter(|&r| r != me) {
            if got[r as usize].is_some() {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(file(dir, r)) {
                match parse(&text, r, me, n, job, max_msg) {
                    Ok(c) => got[r as usize] = Some(c),
                    Err(e) => last_err = Some(format!("verbs-{r}.conn: {e}")),
                }
            }
        }
        let missing = got
            .iter()
            .enumerate()
            .filter(|(r, c)| *r as u32 != me && c.is_none())
            .count();
        if missing == 0 {
            return Ok(got);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "rendezvous: {missing} of {} peers published no valid verbs connection data in {} within {timeout:?}{}",
                n - 1,
                dir.display(),
                last_err.map(|e| format!(" (last problem: {e})")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until all `n` ranks reached this point (each publishes `TAG-R.ready`): a QP must be
/// in RTR on both sides before the first SEND, or the sender's HCA retries into the void.
pub fn barrier(dir: &Path, tag: &str, rank: u32, n: u32, timeout: Duration) -> Result<(), String> {
    let mark = |r: u32| dir.join(format!("{tag}-{r}.ready"));
    std::fs::create_dir_all(dir).map_err(|e| format!("rendezvous directory {}: {e}", dir.display()))?;
    std::fs::write(mark(rank), b"").map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    let deadline = Instant::now() + timeout;
    loop {
        let missing = (0..n).filter(|&r| !mark(r).exists()).count();
        if missing == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "rendezvous: {missing} of {n} nodes did not reach '{tag}' in {} within {timeout:?}",
                dir.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::verbs::conn::sample as info;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ftcoll-verbs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn ranks_on_threads_exchange_their_connection_data() {
        let dir = tmpdir("ok");
        let n = 4u32;
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let mine: Vec<ConnInfo> = (0..n).filter(|&t| t != r).map(|t| info(5, r, t)).collect();
                    publish(&dir, r, &mine).unwrap();
                    collect(&dir, r, n, 5, 1200, Duration::from_secs(5)).unwrap()
                })
            })
            .collect();
        for (me, h) in hs.into_iter().enumerate() {
            let got = h.join().unwrap();
            for (from, c) in got.iter().enumerate() {
                if from == me {
                    assert!(c.is_none());
                } else {
                    assert_eq!(*c, Some(info(5, from as u32, me as u32)));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_jobs_or_a_forged_file_times_out_naming_the_problem() {
        let dir = tmpdir("bad");
        publish(&dir, 1, &[info(6, 1, 0)]).unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("1 of 1 peers") && e.contains("another job"), "{e}");
        // Rank 2's file carrying rank 1's data is refused.
        publish(&dir, 1, &[info(5, 2, 0)]).unwrap();
        let e = collect(&dir, 0, 3, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("claims to be from rank 2") || e.contains("2 of 2"), "{e}");
        std::fs::write(dir.join("verbs-1.conn"), "0 nothex\n").unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("wrong length"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn barrier_waits_for_everyone_and_names_the_missing() {
        let dir = tmpdir("barrier");
        let e = barrier(&dir, "t", 0, 2, Duration::from_millis(30)).unwrap_err();
        assert!(e.contains("1 of 2 nodes") && e.contains("'t'"), "{e}");
        let d = dir.clone();
        let h = std::thread::spawn(move || barrier(&d, "u", 1, 2, Duration::from_secs(5)));
        barrier(&dir, "u", 0, 2, Duration::from_secs(5)).unwrap();
        h.join().unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
