//! Figures drawn from the simulator, bench histograms and bench reports (`ftcoll plot`), as SVG
//! or PNG with plotters. One file per figure kind; [`chart`] renders them all.
//!
//! Text in PNGs is rasterized from the DejaVu Sans font embedded in the binary
//! (`assets/fonts/`, Bitstream Vera license), so no system font is needed.

pub mod cdf;
pub mod chart;
pub mod compare;
pub mod correction;
pub mod messages;
pub mod scaling;

pub use chart::{Axis, Chart, Line, render};

pub use crate::experiment::sweep::Sweep;

/// Output format, from the file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// `.svg` or `.png` (case-insensitive); anything else is a one-line error.
    pub fn from_path(path: &std::path::Path) -> Result<Format, String> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(format!(
                "cannot tell the image format of '{}' (expected a .svg or .png file name)",
                path.display()
            )),
        }
    }

    /// The format of an output path whose directory exists (checked before any work is done).
    pub fn of_output(path: &std::path::Path) -> Result<Format, String> {
        let f = Format::from_path(path)?;
        match path.parent() {
            Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => {
                Err(format!("cannot write {}: no directory {}", path.display(), d.display()))
            }
            _ => Ok(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(Format::from_path(Path::new("a/b.svg")), Ok(Format::Svg));
        assert_eq!(Format::from_path(Path::new("b.PNG")), Ok(Format::Png));
        assert!(Format::from_path(Path::new("b.jpg")).is_err());
        assert!(Format::from_path(Path::new("noext")).is_err());
    }
}
