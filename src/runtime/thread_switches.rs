//! How many times the calling thread has been preempted, as the kernel counts it (its
//! involuntary context switches): a thread whose count moved over an interval was taken off
//! its CPU in it for another, so the interval's time is partly the machine's scheduling, not
//! the code it timed. (A sleep or a blocking wait is a voluntary switch: not counted, a
//! blocking poll mode's round trips are its own.) `ftcoll logp` and the predictions'
//! ping-pongs leave such round trips out of a calibration (see
//! [`crate::runtime::logp::estimate_samples`]).
//!
//! Read from `/proc/thread-self/status` (`nonvoluntary_ctxt_switches`); the file is opened
//! once and re-read at offset 0 (one `pread`), so a counter belongs to the thread that opened
//! it.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// The calling thread's preemptions (see the module's doc). Counts the thread that opened it.
pub struct SwitchCounter {
    file: Option<File>,
    buf: Vec<u8>,
}

impl SwitchCounter {
    /// A counter of the calling thread (one that reads nothing where the kernel gives no such
    /// file: [`SwitchCounter::read`] then says `None`).
    pub fn of_this_thread() -> SwitchCounter {
        SwitchCounter {
            file: File::open("/proc/thread-self/status").ok(),
            buf: vec![0; 8192],
        }
    }

    /// Whether this kernel tells (a counter that reads something).
    pub fn works(&mut self) -> bool {
        self.read().is_some()
    }

    /// The count now (`None`: unknown).
    pub fn read(&mut self) -> Option<u64> {
        let n = self.file.as_ref()?.read_at(&mut self.buf, 0).ok()?;
        parse_status(std::str::from_utf8(&self.buf[..n]).ok()?)
    }
}

/// `status`'s involuntary context switches.
fn parse_status(text: &str) -> Option<u64> {
    const NAME: &str = "nonvoluntary_ctxt_switches:";
    let line = text.lines().find(|l| l.starts_with(NAME))?;
    line[NAME.len()..].trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_file_parses() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_status(status), Some(7));
        assert_eq!(parse_status("Name:\tx\nvoluntary_ctxt_switches:\t5\n"), None);
    }

    /// More spinning threads than cores: this one, spinning too, is preempted within a
    /// few of the scheduler's slices.
    #[test]
    fn a_thread_that_shares_its_core_is_counted_preempted() {
        let mut c = SwitchCounter::of_this_thread();
        let Some(before) = c.read() else {
            eprintln!("this kernel gives no per-thread switch count; nothing to check");
            return;
        };
        let cores = std::thread::available_parallelism().map_or(2, |p| p.get());
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut after = before;
        // The spinners stop however this thread leaves the scope (a panic included).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            let _stop = Stop(&stop);
            for _ in 0..2 * cores {
                s.spawn(|| {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            let start = std::time::Instant::now();
            while after == before && start.elapsed() < std::time::Duration::from_secs(5) {
                std::hint::spin_loop();
                after = c.read().unwrap_or(before);
            }
        });
        assert!(
            after > before,
            "not preempted in 5 s among {} spinning threads",
            2 * cores
        );
    }
}
