//! A run's rendezvous directory (`docs/security.md`): the files through which the processes of
//! one launch exchange their UDP addresses (`node-R.addr`), verbs connection data
//! (`verbs-R.conn`) and barrier marks (`TAG-R.ready`), when no rank 0 hands them out.
//!
//! **Versioned by the run.** A [`RunId`] names one launch: every process of it shares the id,
//! the next launch has another. It is `--run-id STR`, else the launcher's (Slurm
//! `SLURM_JOB_ID`.`SLURM_STEP_ID`, PMIx `PMIX_NAMESPACE` as Open MPI's `mpirun` exports it,
//! older Open MPI `OMPI_MCA_ess_base_jobid`). The files live in `DIR/run-ID/` ([`RunDir`]),
//! so a file an earlier run left in `DIR` is never read. That directory is created with mode
//! 0700; one that exists already is used only if it is a real directory (not a symlink) of
//! this user that nobody else may write. Files are written under a fresh name opened
//! exclusively, then renamed (readers never see half a file); they are read without following
//! a symlink.
//!
//! **Sealed by the key.** With a key, each file ends in a line `mac HEX`, the tag
//! `MAC(key, "ftcoll rendezvous file" ‖ run id ‖ rank ‖ name ‖ body)` ([`AuthKey::tag`], the
//! one sealing of [`crate::wire::mac`]). A file without a valid tag is treated as not there
//! yet (it may be being replaced) and named in the timeout error. The key a run seals with is
//! its session key, [`RunId::session_key`]: `AuthKey::session` of a keyed hash of the run id,
//! so what one launch sealed does not verify in the next (datagrams and FENCEs included).
//! How every experiment's ids are derived: [`crate::transport::ids`].

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::wire::hex;
use crate::wire::mac::AuthKey;

pub use crate::transport::ids::{RUN_ID_MAX, RunId};

/// The largest rendezvous file read (verbs connection data of a few thousand ranks fits).
const FILE_MAX: u64 = 16 << 20;

/// What reading a rendezvous file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No such file (yet).
    Missing,
    /// A file that cannot be used (yet): unreadable, too long, or without a valid tag.
    Bad(String),
    /// The file's body (its tag line removed).
    Body(String),
}

/// The directory of one run inside a rendezvous directory, and the key its files are sealed
/// with.
#[derive(Clone, Debug)]
pub struct RunDir {
    path: PathBuf,
    run: RunId,
    key: Option<AuthKey>,
}

impl RunDir {
    /// Creates (or checks) `base/run-ID/`; `key` seals the files (`None`: untagged files).
    pub fn open(base: &Path, run: &RunId, key: Option<AuthKey>) -> Result<RunDir, String> {
        std::fs::create_dir_all(base).map_err(|e| format!("rendezvous directory {}: {e}", base.display()))?;
        let path = base.join(run.dir_name());
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => check_private(&path)?,
            Err(e) => return Err(format!("rendezvous directory {}: {e}", path.display())),
        }
        Ok(RunDir {
            path,
            run: run.clone(),
            key,
        })
    }

    /// The run's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run's id.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// Whether the files carry a tag.
    pub fn keyed(&self) -> bool {
        self.key.is_some()
    }

    /// Calls `f` with the parts the tag of `name` covers.
    fn parts<R>(&self, name: &str, rank: u32, body: &str, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let id = self.run.as_str().as_bytes();
        f(&[
            b"ftcoll rendezvous file",
            &(id.len() as u32).to_le_bytes(),
            id,
            &rank.to_le_bytes(),
            &(name.len() as u32).to_le_bytes(),
            name.as_bytes(),
            body.as_bytes(),
        ])
    }

    /// Publishes `name` (rank `rank`'s file) holding `body`: written under a fresh name opened
    /// exclusively (mode 0600), then renamed over `name`.
    pub fn publish(&self, name: &str, rank: u32, body: &str) -> Result<(), String> {
        let mut text = body.to_string();
        if let Some(k) = &self.key {
            let tag = self.parts(name, rank, body, |p| k.tag(p));
            text += &format!("mac {}\n", hex::encode(&tag));
        }
        let salt = crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw a name: {e}"))?;
        let tmp = self
            .path
            .join(format!(".{name}.{}.{}", std::process::id(), hex::encode(&salt[..8])));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        f.write_all(text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        drop(f);
        std::fs::rename(&tmp, self.path.join(name)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot publish in {}: {e}", self.path.display())
        })
    }

    /// Reads `name` (rank `rank`'s file): its body if its tag is valid (or without a key).
    pub fn read(&self, name: &str, rank: u32) -> Found {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path.join(name));
        let mut f = match f {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Missing,
            Err(e) => return Found::Bad(format!("{name}: {e}")),
        };
        let mut raw = Vec::new();
        if let Err(e) = (&mut f).take(FILE_MAX + 1).read_to_end(&mut raw) {
            return Found::Bad(format!("{name}: {e}"));
        }
        if raw.len() as u64 > FILE_MAX {
            return Found::Bad(format!("{name}: longer than {FILE_MAX} bytes"));
        }
        let Ok(text) = String::from_utf8(raw) else {
            return Found::Bad(format!("{name}: not UTF-8"));
        };
        // The tag line is the last line: everything before it is the body.
        let trimmed = text.strip_suffix('\n').unwrap_or(&text);
        let (body, tag) = match trimmed.rfind('\n').map(|i| i + 1).unwrap_or(0) {
            at if trimmed[at..].starts_with("mac ") => (&text[..at], Some(&trimmed[at + 4..])),
            _ => (text.as_str(), None),
        };
        let Some(k) = &self.key else {
            return Found::Body(body.to_string());
        };
        match tag.and_then(|t| hex::decode::<16>(t.trim()).ok()) {
            Some(t) if self.parts(name, rank, body, |p| k.verify(p, &t)) => Found::Body(body.to_string()),
            Some(_) => Found::Bad(format!("{name}: bad tag (another key or run, or altered)")),
            None => Found::Bad(format!("{name}: no tag")),
        }
    }
}

/// Refuses an existing run directory unless it is a real directory of this user that no one
/// else may write or read.
fn check_private(path: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(path).map_err(|e| format!("rendezvous directory {}: {e}", path.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o077 != 0 {
        return Err(format!(
            "rendezvous directory {} exists but is not a private directory of this user (owner {}, mode {:o}): refusing it",
            path.display(),
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
