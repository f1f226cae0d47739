//! The data-directory lock the broker takes (`<data>/LOCK`, an exclusive `flock`
//! that the OS drops when its holder dies), taken here too so that no broker
//! starts on a directory while it is dumped or replaced, and none is running now.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{IoContext, Result, ToolsError};

/// The lock file's name in a data directory (the broker's `registry::lock_data_dir`).
pub const LOCK_FILE: &str = "LOCK";

/// Holds the lock of a data directory until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the lock of the existing directory `dir`, or says that a broker holds it.
pub fn lock(dir: &Path) -> Result<DataDirLock> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ctx(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(DataDirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(ToolsError::DataDirInUse { dir: dir.to_owned() }),
        Err(std::fs::TryLockError::Error(e)) => Err(ToolsError::io(format!("locking {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let err = lock(dir.path()).unwrap_err();
        assert!(matches!(err, ToolsError::DataDirInUse { .. }), "{err}");
        assert!(err.to_string().contains("Stop the broker"), "{err}");
        drop(held);
        lock(dir.path()).unwrap();
    }
}
