//! Output files of long runs (`bench --hlog`, `reproduce --out`): opened before the run so an
//! unwritable path fails at once instead of after minutes of measurement, and overwritten only
//! once the new content exists (a failed run leaves the old file as it was).

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Opens `path` for writing without truncating it (created if missing).
pub fn open_for_output(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Replaces the whole content of `f` with `bytes`.
pub fn replace_contents(f: &mut File, bytes: &[u8]) -> std::io::Result<()> {
    f.set_len(0)?;
    f.seek(SeekFrom::Start(0))?;
    f.write_all(bytes)?;
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_path_fails_at_open_and_a_replaced_file_holds_only_the_new_content() {
        let dir = std::env::temp_dir().join(format!("ftcoll-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = open_for_output(&dir.join("no-such-dir").join("x")).unwrap_err();
        assert!(e.starts_with("cannot write "), "{e}");
        let p = dir.join("out.txt");
        std::fs::write(&p, "old content that is longer").unwrap();
        let mut f = open_for_output(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "old content that is longer",
            "kept until replaced"
        );
        replace_contents(&mut f, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
