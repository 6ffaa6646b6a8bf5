//! Where a subcommand's Markdown report goes: a file in its output
//! directory, and standard output.

use std::path::Path;

use anyhow::Result;

/// Writes `report` to `dir/file` (creating `dir`) and prints it, then the
/// file's path.
pub fn save_report(dir: &Path, file: &str, report: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(file);
    std::fs::write(&path, report)?;
    println!("{report}");
    println!("report: {}", path.display());
    Ok(())
}
