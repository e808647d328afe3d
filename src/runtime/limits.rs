//! The host's limits on a run's size, and the checks the experiment specs make against them
//! before anything is allocated.
//!
//! Each subsystem that allocates per node states its own footprint next to the code that
//! allocates (`Engine::footprint`, `AgreeSim::footprint`, `Reliable::footprint`,
//! `InprocNet::footprint`); a spec's validation multiplies it out for the run and compares it
//! with what the host offers:
//!
//! - memory: the least of `MemAvailable` (`/proc/meminfo`), the address-space limit
//!   (`ulimit -v`) and the cgroup's `memory.max` less `memory.current`;
//! - file descriptors: the soft `RLIMIT_NOFILE` (`ulimit -n`), as `/proc/self/limits` shows it.
//!
//! A limit that cannot be read (another OS, no `/proc`) does not refuse anything. The errors
//! are one line naming the flag, its value, the need, the limit and where the limit comes from.

use std::fmt::Write as _;

/// Memory this process may still use, in bytes, and where that bound comes from; `None`
/// when nothing can be read.
pub fn memory() -> Option<(u64, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    let cg_max = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok();
    let cg_cur = std::fs::read_to_string("/sys/fs/cgroup/memory.current").ok();
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let mapped = status.as_deref().and_then(vm_size);
    memory_from(
        meminfo.as_deref(),
        limits.as_deref(),
        mapped,
        cg_max.as_deref(),
        cg_cur.as_deref(),
    )
}

/// The address space already mapped (`VmSize` of `/proc/self/status`), in bytes.
fn vm_size(status: &str) -> Option<u64> {
    let kb = status.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
    kb.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()
        .map(|k| k.saturating_mul(1024))
}

/// [`memory`] from the texts of `/proc/meminfo`, `/proc/self/limits`, the address space
/// already mapped (`mapped` bytes, which count against `ulimit -v`) and the cgroup files.
pub fn memory_from(
    meminfo: Option<&str>,
    limits: Option<&str>,
    mapped: Option<u64>,
    cg_max: Option<&str>,
    cg_cur: Option<&str>,
) -> Option<(u64, &'static str)> {
    let avail = meminfo.and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| (kb.saturating_mul(1024), "MemAvailable"))
    });
    let address_space = limits
        .and_then(|l| soft_limit(l, "Max address space"))
        .map(|b| (b.saturating_sub(mapped.unwrap_or(0)), "ulimit -v"));
    let cgroup = cg_max.and_then(|m| m.trim().parse::<u64>().ok()).map(|max| {
        let used = cg_cur.and_then(|c| c.trim().parse::<u64>().ok()).unwrap_or(0);
        (max.saturating_sub(used), "cgroup memory.max")
    });
    [avail, address_space, cgroup].into_iter().flatten().min_by_key(|x| x.0)
}

/// File descriptors this process may hold (the soft `RLIMIT_NOFILE`); `None` when unknown
/// or unlimited.
pub fn fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    soft_limit(&limits, "Max open files")
}

/// The soft limit of the `/proc/self/limits` row named `name` (`None`: unlimited or absent).
fn soft_limit(limits: &str, name: &str) -> Option<u64> {
    let row = limits.lines().find_map(|l| l.strip_prefix(name))?;
    row.split_whitespace().next()?.parse().ok()
}

/// `bytes` for people: `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes == u64::MAX {
        // Saturated arithmetic: the need does not fit in 64 bits.
        return "more than 16 EiB".into();
    }
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let mut s = String::new();
    if u == 0 {
        let _ = write!(s, "{bytes} B");
    } else {
        let _ = write!(s, "{v:.1} {}", UNITS[u]);
    }
    s
}

/// Refuses `flag` (given as `value`) when `need` bytes for `what` exceed `host` (the bound
/// and its source, as [`memory`] returns them).
pub fn check_memory_against(
    flag: &str,
    value: u64,
    need: u64,
    what: &str,
    host: Option<(u64, &'static str)>,
) -> Result<(), String> {
    match host {
        Some((have, source)) if need > have => Err(format!(
            "{flag} {value} needs about {} for {what}, this machine has {} ({source})",
            human(need),
            human(have)
        )),
        _ => Ok(()),
    }
}

/// [`check_memory_against`] this host's [`memory`].
pub fn check_memory(flag: &str, value: u64, need: u64, what: &str) -> Result<(), String> {
    check_memory_against(flag, value, need, what, memory())
}

/// Refuses `flag` (given as `value`) when it needs more than `limit` file descriptors.
pub fn check_fds_against(flag: &str, value: u64, need: u64, what: &str, limit: Option<u64>) -> Result<(), String> {
    match limit {
        Some(have) if need > have => Err(format!(
            "{flag} {value} needs about {need} file descriptors ({what}), the limit is {have} (ulimit -n)"
        )),
        _ => Ok(()),
    }
}

/// [`check_fds_against`] this process's [`fds`].
pub fn check_fds(flag: &str, value: u64, need: u64, what: &str) -> Result<(), String> {
    check_fds_against(flag, value, need, what, fds())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
Max address space         2147483648           unlimited            bytes     \n\
Max open files            1024                 4096                 files     \n";
    const UNLIMITED: &str = "Max address space         unlimited            unlimited            bytes     \n\
Max open files            unlimited            unlimited            files     \n";

    #[test]
    fn memory_is_the_least_of_meminfo_ulimit_and_cgroup() {
        let mi = "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(
            memory_from(Some(mi), None, None, None, None),
            Some((20_480_000_000, "MemAvailable"))
        );
        assert_eq!(
            memory_from(Some(mi), Some(LIMITS), Some(147_483_648), None, None),
            Some((2_000_000_000, "ulimit -v"))
        );
        assert_eq!(
            memory_from(Some(mi), Some(UNLIMITED), None, Some("1000000\n"), Some("400000\n")),
            Some((600_000, "cgroup memory.max"))
        );
        assert_eq!(
            memory_from(Some(mi), Some(UNLIMITED), None, Some("max\n"), None).map(|m| m.1),
            Some("MemAvailable")
        );
        assert_eq!(memory_from(None, None, None, None, None), None);
        assert_eq!(vm_size("Name:\tx\nVmSize:\t  2048 kB\n"), Some(2 << 20));
    }

    #[test]
    fn fd_limit_is_the_soft_one() {
        assert_eq!(soft_limit(LIMITS, "Max open files"), Some(1024));
        assert_eq!(soft_limit(UNLIMITED, "Max open files"), None);
    }

    #[test]
    fn errors_name_the_flag_the_need_and_the_limit() {
        let e =
            check_memory_against("--nodes", 7, 3 << 30, "the simulator", Some((1 << 30, "MemAvailable"))).unwrap_err();
        assert_eq!(
            e,
            "--nodes 7 needs about 3.0 GiB for the simulator, this machine has 1.0 GiB (MemAvailable)"
        );
        assert!(check_memory_against("--nodes", 7, 1 << 20, "x", Some((1 << 30, "MemAvailable"))).is_ok());
        assert!(check_memory_against("--nodes", 7, u64::MAX, "x", None).is_ok());
        let e = check_fds_against("--nodes", 100_000, 100_010, "UDP sockets", Some(1024)).unwrap_err();
        assert_eq!(
            e,
            "--nodes 100000 needs about 100010 file descriptors (UDP sockets), the limit is 1024 (ulimit -n)"
        );
        assert!(check_fds_against("--nodes", 10, 20, "x", Some(1024)).is_ok());
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 40), "3.0 TiB");
        assert_eq!(human(u64::MAX), "more than 16 EiB");
    }

    #[test]
    fn this_host_has_readable_limits() {
        // Linux: the figures the checks use are there.
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(memory().is_some_and(|m| m.0 > 0));
        }
    }
}
