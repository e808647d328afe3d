//! Build script: the git revision the binary is built from, for `ftcoll --version`, so that a
//! result names the binary that made it, not the checkout of whoever ran it (a binary built
//! here and run on a lent machine's copy of another commit, say). `unknown` outside a git
//! checkout; `+dirty` when tracked files differ from that commit; `+stages` when built with
//! the `stages` feature, whose clock reads on the forwarding path slow every broadcast by a
//! few hundred nanoseconds (`cargo bench --bench stages --features stages` rebuilds
//! `target/release/ftcoll` with it: a later measurement with that binary must be able to tell).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // Rerun when the commit or the tracked sources change (only paths that exist: a missing
    // one would rerun this script, and rebuild the crate, on every build).
    for p in [
        ".git/HEAD",
        ".git/refs",
        ".git/packed-refs",
        ".git/index",
        "src",
        "Cargo.toml",
    ] {
        if Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let rev = git(&["rev-parse", "--short", "HEAD"])
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    // Cargo tells a build script the features it builds with (`CARGO_FEATURE_<NAME>`).
    let stages = std::env::var_os("CARGO_FEATURE_STAGES").is_some();
    println!(
        "cargo:rustc-env=FTCOLL_GIT_REV={rev}{}{}",
        if dirty { "+dirty" } else { "" },
        if stages { "+stages" } else { "" }
    );
}
