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

/// Is `g` an IPv4-mapped GID (`::ffff:a.b.c.d`, what a RoCE v1/v2 port shows for an IPv4
/// address)?
pub fn ipv4_mapped(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

/// The GID index to use (`None`: LID routing, InfiniBand without `--gid-index`, as perftest's
/// default -1). RoCE needs a GID: without `--gid-index` it is chosen as perftest's
/// `get_best_gid_index` does: an IPv4-mapped GID before any other, then RoCE v2 before v1
/// (v2 is routable; v1 stays in one L2 domain), the lowest index among equals. `gid(i)` reads
/// entry `i` (`ibv_query_gid`), `None` on failure; `roce_v2(i)` says whether entry `i` is a
/// RoCE v2 GID (sysfs `gid_attrs/types`).
pub fn pick_gid(
    dev: &str,
    port: &PortInfo,
    want: Option<u8>,
    gid: &dyn Fn(u8) -> Option<[u8; 16]>,
    roce_v2: &dyn Fn(u8) -> bool,
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
            .filter_map(|i| usable(i).map(|g| (i, g)))
            .fold(None, |best: Option<(u8, [u8; 16])>, (i, g)| {
                let rank = |i: u8, g: &[u8; 16]| (ipv4_mapped(g), roce_v2(i));
                match best {
                    Some((b, bg)) if rank(b, &bg) >= rank(i, &g) => Some((b, bg)),
                    _ => Some((i, g)),
                }
            })
            .map(Some)
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
        let v1 = |_: u8| false;
        // InfiniBand: LID routing unless asked.
        assert_eq!(pick_gid("d", &port(1, true, false), None, &g, &v1), Ok(None));
        assert_eq!(
            pick_gid("d", &port(1, true, false), Some(2), &g, &v1),
            Ok(Some((2, [2; 16])))
        );
        // RoCE, nothing to prefer: the first non-zero GID.
        assert_eq!(
            pick_gid("d", &port(1, true, true), None, &g, &v1),
            Ok(Some((1, [1; 16])))
        );
        let e = pick_gid("d", &port(1, true, true), Some(4), &g, &v1).unwrap_err();
        assert!(e.contains("out of range") && e.contains("4 entries"));
        assert!(
            pick_gid("d", &port(1, true, true), Some(0), &g, &v1)
                .unwrap_err()
                .contains("empty")
        );
        let none = |_: u8| None;
        assert!(
            pick_gid("d", &port(1, true, true), None, &none, &v1)
                .unwrap_err()
                .contains("no GID")
        );
    }

    #[test]
    fn roce_prefers_ipv4_mapped_then_v2_as_perftest() {
        // A typical RoCE table: link-local v1, link-local v2, IPv4-mapped v1, IPv4-mapped v2.
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 0, 0, 7]);
        assert!(ipv4_mapped(&v4) && !ipv4_mapped(&ll));
        let table = |i: u8| Some(if i < 2 { ll } else { v4 });
        let v2 = |i: u8| i % 2 == 1;
        assert_eq!(
            pick_gid("d", &port(1, true, true), None, &table, &v2),
            Ok(Some((3, v4)))
        );
        // Without type information (all v1): the first IPv4-mapped one.
        assert_eq!(
            pick_gid("d", &port(1, true, true), None, &table, &|_| false),
            Ok(Some((2, v4)))
        );
        // No IPv4 address: link-local, v2 first.
        let only_ll = |i: u8| (i < 2).then_some(ll);
        assert_eq!(
            pick_gid("d", &port(1, true, true), None, &only_ll, &v2),
            Ok(Some((1, ll)))
        );
    }
}
