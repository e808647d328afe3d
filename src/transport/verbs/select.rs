//! Device, port and GID selection from what the device reports, with the one-line errors the
//! CLI prints (each names what is missing and suggests `--transport udp`).

/// Appended to every "cannot use RDMA here" error.
pub const HINT: &str = "use --transport udp";

/// ENOSYS: what `ibv_get_device_list` sets when the kernel has no RDMA support.
pub const ENOSYS: i32 = 38;

/// The error for an empty or failed device list (`errno` when the list was NULL).
pub fn no_device(errno: Option<i32>) -> String {
    match errno {
        Some(ENOSYS) => format!(
            "no RDMA device: ibv_get_device_list failed with ENOSYS (this kernel has no InfiniBand/RDMA support); {HINT}"
        ),
        Some(e) => format!(
            "no RDMA device: ibv_get_device_list failed ({}); {HINT}",
            std::io::Error::from_raw_os_error(e)
        ),
        None => format!("no RDMA device found (ibv_get_device_list returned an empty list); {HINT}"),
    }
}

/// Index of the device to open: `want` by name, else the first.
pub fn pick_device(names: &[String], want: Option<&str>) -> Result<usize, String> {
    if names.is_empty() {
        return Err(no_device(None));
    }
    match want {
        None => Ok(0),
        Some(w) => names.iter().position(|n| n == w).ok_or_else(|| {
            format!(
                "no RDMA device named '{w}' (found: {}); pick one with --device or {HINT}",
                names.join(", ")
            )
        }),
    }
}

/// What a port reports (`ibv_query_port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub num: u8,
    pub active: bool,
    pub ethernet: bool,
    pub lid: u16,
    pub gid_tbl_len: i32,
    /// `ibv_mtu` code.
    pub active_mtu: u8,
}

/// The port to use: `want`, which must be active, else the first active one.
pub fn pick_port(dev: &str, ports: &[PortInfo], want: Option<u8>) -> Result<PortInfo, String> {
    match want {
        Some(w) => {
            let p = ports
                .iter()
                .find(|p| p.num == w)
                .ok_or_else(|| format!("RDMA device {dev} has no port {w} (ports 1..={}); {HINT}", ports.len()))?;
            if !p.active {
                return Err(format!("port {w} of RDMA device {dev} is not active; {HINT}"));
            }
            Ok(*p)
        }
        None => ports.iter().find(|p| p.active).copied().ok_or_else(|| {
            format!(
                "no active port on RDMA device {dev} ({} ports, none ACTIVE); {HINT}",
                ports.len()
            )
        }),
    }
}

/// The GID index to use (`None`: LID routing, InfiniBand without `--gid-index`, as perftest's
/// default -1). RoCE needs a GID: without `--gid-index` the first non-zero entry is taken.
/// `gid(i)` reads entry `i` (`ibv_query_gid`), `None` on failure.
pub fn pick_gid(
    dev: &str,
    port: &PortInfo,
    want: Option<u8>,
    gid: &dyn Fn(u8) -> Option<[u8; 16]>,
) -> Result<Option<(u8, [u8; 16])>, String> {
    let usable = |i: u8| gid(i).filter(|g| g.iter().any(|&b| b != 0));
    match want {
        Some(i) => {
            if i32::from(i) >= port.gid_tbl_len {
                return Err(format!(
                    "GID index {i} out of range on {dev} port {} (table has {} entries); {HINT}",
                    port.num, port.gid_tbl_len
                ));
            }
            usable(i).map(|g| Some((i, g))).ok_or_else(|| {
                format!(
                    "GID index {i} on {dev} port {} is empty or unreadable; pick another --gid-index or {HINT}",
                    port.num
                )
            })
        }
        None if !port.ethernet => Ok(None),
        None => (0..port.gid_tbl_len.clamp(0, 255) as u8)
            .find_map(|i| usable(i).map(|g| Some((i, g))))
            .ok_or_else(|| {
                format!(
                    "RoCE port {} of {dev} has no GID configured (set an IP address on its interface); {HINT}",
                    port.num
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(num: u8, active: bool, ethernet: bool) -> PortInfo {
        PortInfo {
            num,
            active,
            ethernet,
            lid: 3,
            gid_tbl_len: 4,
            active_mtu: 5,
        }
    }

    #[test]
    fn no_device_messages_are_one_line_and_suggest_udp() {
        for e in [Some(ENOSYS), Some(13), None] {
            let m = no_device(e);
            assert!(!m.contains('\n'), "{m}");
            assert!(m.starts_with("no RDMA device"), "{m}");
            assert!(m.ends_with("use --transport udp"), "{m}");
        }
        assert!(no_device(Some(ENOSYS)).contains("ENOSYS"));
    }

    #[test]
    fn device_by_name_or_first() {
        let names = vec!["mlx5_0".to_string(), "mlx5_1".to_string()];
        assert_eq!(pick_device(&names, None), Ok(0));
        assert_eq!(pick_device(&names, Some("mlx5_1")), Ok(1));
        let e = pick_device(&names, Some("rxe0")).unwrap_err();
        assert!(e.contains("'rxe0'") && e.contains("mlx5_0, mlx5_1") && e.contains("--transport udp"));
        assert!(pick_device(&[], None).unwrap_err().contains("empty list"));
    }

    #[test]
    fn first_active_port_or_the_one_asked_for() {
        let ports = [port(1, false, false), port(2, true, false)];
        assert_eq!(pick_port("d", &ports, None).unwrap().num, 2);
        assert!(pick_port("d", &ports, Some(1)).unwrap_err().contains("not active"));
        assert!(pick_port("d", &ports, Some(3)).unwrap_err().contains("no port 3"));
        let e = pick_port("d", &[port(1, false, false)], None).unwrap_err();
        assert!(e.contains("no active port") && e.contains("--transport udp"));
    }

    #[test]
    fn gid_selection() {
        let g = |i: u8| Some(if i == 0 { [0u8; 16] } else { [i; 16] });
        // InfiniBand: LID routing unless asked.
        assert_eq!(pick_gid("d", &port(1, true, false), None, &g), Ok(None));
        assert_eq!(
            pick_gid("d", &port(1, true, false), Some(2), &g),
            Ok(Some((2, [2; 16])))
        );
        // RoCE: first non-zero GID.
        assert_eq!(pick_gid("d", &port(1, true, true), None, &g), Ok(Some((1, [1; 16]))));
        let e = pick_gid("d", &port(1, true, true), Some(4), &g).unwrap_err();
        assert!(e.contains("out of range") && e.contains("4 entries"));
        assert!(
            pick_gid("d", &port(1, true, true), Some(0), &g)
                .unwrap_err()
                .contains("empty")
        );
        let none = |_: u8| None;
        assert!(
            pick_gid("d", &port(1, true, true), None, &none)
                .unwrap_err()
                .contains("no GID")
        );
    }
}
