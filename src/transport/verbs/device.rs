//! Opening the RDMA device: list, pick by name, first active port (or `--port`), GID (or
//! `--gid-index`), one protection domain shared by the endpoints of this process.

use std::ffi::CStr;
use std::sync::Arc;

use super::ibv::*;

use super::VerbsConfig;
use super::select::{self, HINT, PortInfo};

/// `IBV_LINK_LAYER_ETHERNET` (an anonymous enum in verbs.h that bindgen does not export).
const LINK_LAYER_ETHERNET: u8 = 2;

/// An open device context, its chosen port and GID, and a protection domain.
pub struct Device {
    pub(crate) ctx: *mut ibv_context,
    pub(crate) pd: *mut ibv_pd,
    pub name: String,
    pub port: PortInfo,
    /// (index, GID) when a GRH is used.
    pub gid: Option<(u8, [u8; 16])>,
}

// SAFETY: libibverbs objects may be used from any thread (all verbs are thread-safe per the
// libibverbs API); `Device` only hands out the context and PD for creating resources.
unsafe impl Send for Device {}
// SAFETY: as above; `Device` has no interior mutability of its own.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: pd and ctx were returned by ibv_alloc_pd / ibv_open_device, are freed once
        // here, and every endpoint holding an Arc to this device has already been dropped.
        unsafe {
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
            if !self.ctx.is_null() {
                ibv_close_device(self.ctx);
            }
        }
    }
}

struct DeviceList(*mut *mut ibv_device, usize);

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once.
        unsafe { ibv_free_device_list(self.0) }
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

impl Device {
    /// Opens the device `cfg` selects; every failure is one line ending in the UDP hint.
    pub fn open(cfg: &VerbsConfig) -> Result<Arc<Device>, String> {
        let mut num: std::os::raw::c_int = 0;
        // SAFETY: ibv_get_device_list writes the count and returns a NULL-terminated array or
        // NULL with errno set.
        let raw = unsafe { ibv_get_device_list(&mut num) };
        if raw.is_null() {
            return Err(select::no_device(errno().raw_os_error()));
        }
        let list = DeviceList(raw, num.max(0) as usize);
        let names: Vec<String> = (0..list.1)
            .map(|i| {
                // SAFETY: i < num entries of the list; the name is a NUL-terminated string
                // owned by the device, valid while the list is.
                unsafe {
                    let d = *list.0.add(i);
                    CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy().into_owned()
                }
            })
            .collect();
        let idx = select::pick_device(&names, cfg.device.as_deref())?;
        let name = names[idx].clone();
        // SAFETY: idx < num; the device pointer is valid while the list is.
        let ctx = unsafe { ibv_open_device(*list.0.add(idx)) };
        if ctx.is_null() {
            return Err(format!("cannot open RDMA device {name}: {}; {HINT}", errno()));
        }
        let mut dev = Device {
            ctx,
            pd: std::ptr::null_mut(),
            name,
            port: PortInfo {
                num: 0,
                active: false,
                ethernet: false,
                lid: 0,
                gid_tbl_len: 0,
                active_mtu: 0,
            },
            gid: None,
        };
        // SAFETY: plain C struct, all-zero is a valid value; ctx is open.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is an open context and attr a valid out-pointer.
        if unsafe { ibv_query_device(ctx, &mut attr) } != 0 {
            return Err(format!("cannot query RDMA device {}: {}; {HINT}", dev.name, errno()));
        }
        let ports: Vec<PortInfo> = (1..=attr.phys_port_cnt)
            .filter_map(|p| {
                // SAFETY: plain C struct, zero is valid; ctx is open; p is a port number of it.
                let mut pa: ibv_port_attr = unsafe { std::mem::zeroed() };
                (unsafe { ___ibv_query_port(ctx, p, &mut pa) } == 0).then_some(PortInfo {
                    num: p,
                    active: pa.state == ibv_port_state::IBV_PORT_ACTIVE,
                    ethernet: pa.link_layer == LINK_LAYER_ETHERNET,
                    lid: pa.lid,
                    gid_tbl_len: pa.gid_tbl_len,
                    active_mtu: pa.active_mtu as u8,
                })
            })
            .collect();
        dev.port = select::pick_port(&dev.name, &ports, cfg.port)?;
        let port = dev.port.num;
        let read_gid = |i: u8| {
            // SAFETY: ibv_gid is plain bytes; ctx is open; ibv_query_gid writes 16 bytes.
            let mut g: ibv_gid = unsafe { std::mem::zeroed() };
            let rc = unsafe { ibv_query_gid(ctx, port, std::os::raw::c_int::from(i), &mut g) };
            // SAFETY: every bit pattern of the union is a valid [u8; 16].
            (rc == 0).then_some(unsafe { g.raw })
        };
        // The GID's RoCE version, as libibverbs itself reads it (rdma-sys has no
        // ibv_query_gid_ex): "RoCE v2" or "IB/RoCE v1".
        let types = format!("/sys/class/infiniband/{}/ports/{port}/gid_attrs/types", dev.name);
        let roce_v2 = |i: u8| {
            std::fs::read_to_string(format!("{types}/{i}")).is_ok_and(|t| t.trim().eq_ignore_ascii_case("RoCE v2"))
        };
        dev.gid = select::pick_gid(&dev.name, &dev.port, cfg.gid_index, &read_gid, &roce_v2)?;
        // SAFETY: ctx is open.
        dev.pd = unsafe { ibv_alloc_pd(ctx) };
        if dev.pd.is_null() {
            return Err(format!(
                "cannot allocate a protection domain on {}: {}; {HINT}",
                dev.name,
                errno()
            ));
        }
        Ok(Arc::new(dev))
    }
}
