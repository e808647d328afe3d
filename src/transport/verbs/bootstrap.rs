//! Connection data through the job's rendezvous directory (the bootstrap `ftcoll node
//! --rendezvous` uses for UDP addresses), inside the run's own subdirectory ([`RunDir`]: what
//! another run left is never read): rank R publishes `verbs-R.conn`, one `TO HEX` line per
//! peer (written then renamed, so readers never see half a file; with a key, sealed by a tag
//! over the run id, the rank and the body), and reads every other rank's line addressed to it.
//! Lines are [`ConnInfo`] and validated; a file of another job or run, with a bad tag, or
//! malformed is waited on (it may be a leftover being replaced) and named if it never becomes
//! valid.

use std::time::{Duration, Instant};

use super::conn::ConnInfo;
use crate::transport::run_dir::{Found, RunDir};

fn file(rank: u32) -> String {
    format!("verbs-{rank}.conn")
}

/// Publishes what rank `rank` tells each peer.
pub fn publish(dir: &RunDir, rank: u32, infos: &[ConnInfo]) -> Result<(), String> {
    let text: String = infos.iter().map(|c| format!("{} {}\n", c.to, c.to_hex())).collect();
    dir.publish(&file(rank), rank, &text)
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
    dir: &RunDir,
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
            match dir.read(&file(r), r) {
                Found::Missing => {}
                Found::Bad(e) => last_err = Some(e),
                Found::Body(text) => match parse(&text, r, me, n, job, max_msg) {
                    Ok(c) => got[r as usize] = Some(c),
                    Err(e) => last_err = Some(format!("{}: {e}", file(r))),
                },
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
                dir.path().display(),
                last_err.map(|e| format!(" (last problem: {e})")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until all `n` ranks reached this point (each publishes `TAG-R.ready`, sealed like
/// every file of the run): a QP must be in RTR on both sides before the first SEND, or the
/// sender's HCA retries into the void.
pub fn barrier(dir: &RunDir, tag: &str, rank: u32, n: u32, timeout: Duration) -> Result<(), String> {
    let mark = |r: u32| format!("{tag}-{r}.ready");
    dir.publish(&mark(rank), rank, "")?;
    let deadline = Instant::now() + timeout;
    let mut reached = vec![false; n as usize];
    let mut last_err: Option<String> = None;
    loop {
        for r in 0..n {
            if reached[r as usize] {
                continue;
            }
            match dir.read(&mark(r), r) {
                Found::Missing => {}
                Found::Bad(e) => last_err = Some(e),
                Found::Body(_) => reached[r as usize] = true,
            }
        }
        let missing = reached.iter().filter(|x| !**x).count();
        if missing == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "rendezvous: {missing} of {n} nodes did not reach '{tag}' in {} within {timeout:?}{}",
                dir.path().display(),
                last_err.map(|e| format!(" (last problem: {e})")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::run_dir::RunId;
    use crate::transport::verbs::conn::sample as info;
    use crate::wire::mac::AuthKey;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ftcoll-verbs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn run(base: &std::path::Path, id: &str, key: Option<AuthKey>) -> RunDir {
        RunDir::open(base, &RunId::new(id).unwrap(), key).unwrap()
    }

    #[test]
    fn ranks_on_threads_exchange_their_connection_data() {
        let base = tmpdir("ok");
        let dir = run(&base, "r", Some(AuthKey::from_bytes([7; 16])));
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
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn another_jobs_or_a_forged_file_times_out_naming_the_problem() {
        let base = tmpdir("bad");
        let dir = run(&base, "r", None);
        publish(&dir, 1, &[info(6, 1, 0)]).unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("1 of 1 peers") && e.contains("another job"), "{e}");
        // Rank 2's file carrying rank 1's data is refused.
        publish(&dir, 1, &[info(5, 2, 0)]).unwrap();
        let e = collect(&dir, 0, 3, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("claims to be from rank 2") || e.contains("2 of 2"), "{e}");
        std::fs::write(dir.path().join("verbs-1.conn"), "0 nothex\n").unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("wrong length"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn another_runs_leftover_connection_data_is_never_read() {
        let base = tmpdir("leftover");
        let key = AuthKey::from_bytes([7; 16]);
        // Run A (same job, same key) left rank 1's data behind.
        publish(&run(&base, "A", Some(key.clone())), 1, &[info(5, 1, 0)]).unwrap();
        let b = run(&base, "B", Some(key.clone()));
        let e = collect(&b, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("1 of 1 peers"), "{e}");
        // Even copied into run B's directory, run A's tag does not verify there.
        std::fs::copy(
            base.join(RunId::new("A").unwrap().dir_name()).join("verbs-1.conn"),
            b.path().join("verbs-1.conn"),
        )
        .unwrap();
        let e = collect(&b, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("verbs-1.conn: bad tag"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn connection_data_with_a_bad_or_missing_tag_is_not_used() {
        let base = tmpdir("tag");
        let dir = run(&base, "r", Some(AuthKey::from_bytes([7; 16])));
        // Sealed with another key: the tag does not verify.
        publish(
            &run(&base, "r", Some(AuthKey::from_bytes([8; 16]))),
            1,
            &[info(5, 1, 0)],
        )
        .unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("verbs-1.conn: bad tag"), "{e}");
        // Unsealed (valid data, no tag line).
        let text = format!("0 {}\n", info(5, 1, 0).to_hex());
        std::fs::write(dir.path().join("verbs-1.conn"), &text).unwrap();
        let e = collect(&dir, 0, 2, 5, 1200, Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("verbs-1.conn: no tag"), "{e}");
        // The ready marks are sealed too.
        std::fs::write(dir.path().join("t-1.ready"), "").unwrap();
        let e = barrier(&dir, "t", 0, 2, Duration::from_millis(30)).unwrap_err();
        assert!(e.contains("1 of 2 nodes") && e.contains("t-1.ready: no tag"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn barrier_waits_for_everyone_and_names_the_missing() {
        let base = tmpdir("barrier");
        let dir = run(&base, "r", Some(AuthKey::from_bytes([7; 16])));
        let e = barrier(&dir, "t", 0, 2, Duration::from_millis(30)).unwrap_err();
        assert!(e.contains("1 of 2 nodes") && e.contains("'t'"), "{e}");
        let d = dir.clone();
        let h = std::thread::spawn(move || barrier(&d, "u", 1, 2, Duration::from_secs(5)));
        barrier(&dir, "u", 0, 2, Duration::from_secs(5)).unwrap();
        h.join().unwrap().unwrap();
        // Another run's marks are not this run's.
        let other = run(&base, "other", Some(AuthKey::from_bytes([7; 16])));
        let e = barrier(&other, "u", 0, 2, Duration::from_millis(30)).unwrap_err();
        assert!(e.contains("1 of 2 nodes"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
