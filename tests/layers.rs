//! The source tree's layering (docs/architecture.md, "Layers"): every folder of `src/` sits on
//! one floor, and no production code reaches a floor above its own (model → topology →
//! protocol → wire → sim and transport → runtime → group and fuzz → experiment → report → cli;
//! folders on one floor do not use each other). Test code (`tests.rs`, `*_tests.rs`, files
//! under a `tests/` folder, and `#[cfg(test)]` items) may drive a protocol with the simulator
//! or a node with an experiment, so it is not counted; neither are comments (rustdoc links).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each folder (or top-level file) of `src/` and its floor.
const FLOORS: [(&str, u32); 14] = [
    ("model", 0),
    ("topology", 1),
    ("protocol", 2),
    ("wire", 3),
    ("sim", 4),
    ("transport", 4),
    ("runtime", 5),
    ("group", 6),
    ("fuzz", 6),
    ("experiment", 7),
    ("report", 8),
    ("cli", 9),
    ("lib", 10),
    ("main", 10),
];

fn floor(top: &str) -> Option<u32> {
    FLOORS.iter().find(|(n, _)| *n == top).map(|&(_, f)| f)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Is the whole file test code?
fn test_file(rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs") || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The lines of `src` that are production code: comments and `#[cfg(test)]` items (to the
/// brace that closes them, or their `;`) are blanked, so line numbers stay.
fn production_lines(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // Depth at which a skipped test item started, and whether its body opened yet.
    let mut skip: Option<(i64, bool)> = None;
    let mut depth: i64 = 0;
    for (i, line) in src.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = line.trim_start();
        if skip.is_none() && trimmed.starts_with("#[cfg(test)]") {
            skip = Some((depth, false));
            // The attribute may share its line with the item.
        }
        let opens = code.matches('{').count() as i64;
        let closes = code.matches('}').count() as i64;
        depth += opens - closes;
        match skip {
            Some((start, opened)) => {
                let opened = opened || opens > 0;
                let ends_here = (opened && depth <= start) || (!opened && code.trim_end().ends_with(';'));
                skip = if ends_here { None } else { Some((start, opened)) };
            }
            None if !trimmed.starts_with("//") => out.push((i + 1, code.to_string())),
            None => {}
        }
    }
    out
}

/// `crate::X` paths of production code, as (using folder, used folder, `file:line`).
fn arrows(root: &Path) -> Vec<(String, String, String)> {
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "src/ holds {} Rust files: wrong folder?", files.len());
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src/").to_path_buf();
        if test_file(&rel) {
            continue;
        }
        let first = rel
            .components()
            .next()
            .expect("a path")
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        let top = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        for (ln, code) in production_lines(&text) {
            let mut rest = code.as_str();
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let used: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !used.is_empty() && used != top {
                    out.push((top.clone(), used, format!("src/{}:{ln}", rel.display())));
                }
            }
        }
    }
    out
}

#[test]
fn no_production_code_reaches_a_floor_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = arrows(root);
    let mut unknown = Vec::new();
    let mut upward = Vec::new();
    let mut edges: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (from, to, at) in &all {
        match (floor(from), floor(to)) {
            (Some(a), Some(b)) if b >= a => upward.push(format!("{at}: {from} (floor {a}) uses {to} (floor {b})")),
            (Some(_), Some(_)) => *edges.entry((from.clone(), to.clone())).or_default() += 1,
            _ => unknown.push(format!("{at}: {from} uses {to}")),
        }
    }
    assert!(
        unknown.is_empty(),
        "folders without a floor (add them to FLOORS and docs/architecture.md):\n{}",
        unknown.join("\n")
    );
    assert!(
        upward.is_empty(),
        "arrows that run upward or across a floor:\n{}",
        upward.join("\n")
    );
    // The scan sees the real tree: the runtime drives the protocols over the wire format.
    for (from, to) in [
        ("runtime", "protocol"),
        ("runtime", "wire"),
        ("cli", "experiment"),
        ("sim", "protocol"),
    ] {
        assert!(
            edges.contains_key(&(from.to_string(), to.to_string())),
            "no {from} → {to} arrow found: the scan is broken"
        );
    }
}

#[test]
fn the_scan_skips_comments_and_test_items_only() {
    let src = "use crate::a::B; // crate::z\n\
               /// [`crate::y`]\n\
               #[cfg(test)]\n\
               pub fn sample() -> u32 {\n    crate::x::f()\n}\n\
               #[cfg(test)]\nuse crate::w::V;\n\
               fn g() { crate::c::h() }\n\
               #[cfg(test)]\nmod tests {\n    fn t() {\n        crate::x::f();\n    }\n}\n";
    let kept: Vec<String> = production_lines(src).into_iter().map(|(_, l)| l).collect();
    let joined = kept.join("\n");
    assert!(
        joined.contains("crate::a::B") && joined.contains("crate::c::h"),
        "{joined}"
    );
    for gone in ["crate::z", "crate::y", "crate::x", "crate::w"] {
        assert!(!joined.contains(gone), "{gone} kept: {joined}");
    }
    assert!(test_file(Path::new("protocol/bcast/corrected_tree/tests.rs")));
    assert!(test_file(Path::new("sim/engine_tests.rs")));
    assert!(test_file(Path::new("runtime/procs/rendezvous_tests.rs")));
    assert!(!test_file(Path::new("sim/engine.rs")));
}

#[test]
fn clap_is_used_in_the_cli_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src/");
        if rel.starts_with("cli") || rel == Path::new("main.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        for (ln, code) in production_lines(&text) {
            if code.contains("clap::") || code.contains("use clap") || code.contains("#[arg(") {
                found.push(format!("src/{}:{ln}", rel.display()));
            }
        }
    }
    assert!(found.is_empty(), "clap outside src/cli/:\n{}", found.join("\n"));
}

/// A line of code without its trailing `//` comment and leading attributes (`#[...]`).
fn code_of(line: &str) -> &str {
    let mut l = line.split("//").next().unwrap_or("").trim();
    while let Some(rest) = l.strip_prefix("#[") {
        match rest.find(']') {
            Some(i) => l = rest[i + 1..].trim_start(),
            None => return "",
        }
    }
    l
}

/// Whether `parent`'s text declares module `name` as a file module: `mod name;` with any
/// visibility and attributes (a `#[path]` on it names another file: not counted).
fn declares_mod(parent: &str, name: &str) -> bool {
    let lines: Vec<&str> = parent.lines().collect();
    lines.iter().enumerate().any(|(i, raw)| {
        let l = code_of(raw);
        let l = match l.strip_prefix("pub") {
            Some(r) if r.starts_with('(') => r.find(')').map_or("", |j| r[j + 1..].trim_start()),
            Some(r) if r.starts_with(' ') => r.trim_start(),
            _ => l,
        };
        // A `#[path]` on it, on its line or on any attribute line right above it.
        let pathed = raw.contains("#[path")
            || lines[..i]
                .iter()
                .rev()
                .take_while(|a| a.trim_start().starts_with("#["))
                .any(|a| a.contains("#[path"));
        !pathed
            && l.strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'))
                .is_some_and(|m| m.trim() == name)
    })
}

/// Whether a file's text declares a module at `file` beside it: `#[path = "file"]` before a
/// `mod ...;` (the path of a file module declared in a file that is not `mod.rs` is relative
/// to that file's folder).
fn paths_to(text: &str, file: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        let l = l.trim();
        l.starts_with(&format!("#[path = \"{file}\"]"))
            && lines[i..]
                .iter()
                .take(3)
                .any(|m| code_of(m).contains("mod ") && code_of(m).ends_with(';'))
    })
}

/// Every `.rs` file under `src/` is a module of the crate: a file no `mod` names compiles to
/// nothing, and a test file that is not a module runs no test (experiment/agree_predict's
/// tests went unrun that way until 2026-12-06).
#[test]
fn every_source_file_is_a_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut orphans = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src/");
        if rel == Path::new("lib.rs") || rel == Path::new("main.rs") {
            continue;
        }
        let file = rel.file_name().and_then(|n| n.to_str()).expect("a file name");
        // `a/b/c.rs` and `a/b/c/mod.rs` are module `c` of `a/b.rs` or `a/b/mod.rs`.
        let (name, dir) = match file {
            "mod.rs" => {
                let d = rel.parent().expect("a folder");
                (d.file_name().and_then(|n| n.to_str()).expect("a name"), d.parent())
            }
            _ => (file.trim_end_matches(".rs"), rel.parent()),
        };
        let parents: Vec<PathBuf> = match dir {
            Some(d) if d != Path::new("") => vec![src.join(d).with_extension("rs"), src.join(d).join("mod.rs")],
            _ => vec![src.join("lib.rs"), src.join("main.rs")],
        };
        let declared = parents
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .any(|t| declares_mod(&t, name));
        // Or a file beside it (not `mod.rs`) names it with `#[path]` (a test file beside the
        // file it tests).
        let found = declared
            || files
                .iter()
                .filter(|g| g.parent() == f.parent() && *g != f && !g.ends_with("mod.rs"))
                .filter_map(|g| std::fs::read_to_string(g).ok())
                .any(|t| paths_to(&t, file));
        if !found {
            orphans.push(format!("src/{}", rel.display()));
        }
    }
    assert!(files.len() > 100, "the scan found {} files", files.len());
    assert!(orphans.is_empty(), "files no module declares:\n{}", orphans.join("\n"));
}

#[test]
fn a_module_is_declared_by_mod_or_a_path() {
    assert!(declares_mod("#[cfg(test)]\nmod tests;\n", "tests"));
    assert!(declares_mod("#[cfg(test)] mod tests;", "tests"));
    assert!(declares_mod("pub mod agree;", "agree"));
    assert!(declares_mod("pub(crate) mod ring;", "ring"));
    assert!(declares_mod("pub(in crate::x) mod ring; // the ring", "ring"));
    assert!(!declares_mod("// mod tests;\nmod testsuite;", "tests"));
    assert!(
        !declares_mod("#[path = \"x_tests.rs\"]\nmod tests;", "tests"),
        "names x_tests.rs"
    );
    assert!(paths_to(
        "#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;",
        "x_tests.rs"
    ));
    assert!(!paths_to("#[path = \"x_tests.rs\"]\nmod tests;", "y_tests.rs"));
    assert!(!paths_to("let s = \"x_tests.rs\";", "x_tests.rs"));
}
