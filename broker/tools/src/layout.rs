//! Which files of a data directory a dump takes (see docs/storage.md for the
//! layout): everything the broker reads back, and nothing it rebuilds or owns only
//! while running: not `LOCK`, not the journal (replayed first), not the compiled
//! plugin cache, not temp files a crash left behind.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use serde::Deserialize;

use crate::error::{IoContext, Result, ToolsError};
use crate::lock::LOCK_FILE;

/// Where the topics' metadata lives, one JSON file per topic.
pub const TOPICS_DIR: &str = "topics";
/// Where the partitions live, one directory `<topic>-<n>` each.
pub const PARTITIONS_DIR: &str = "partitions";
/// Internal topics (`__es_offsets`, `__es_schemas`) are the broker's own state and
/// always dumped, whatever `--topics` says.
pub const INTERNAL_PREFIX: &str = "__es_";
/// Subtrees never dumped, relative to the data directory: the journal (replayed
/// first), the compiled-plugin cache, and online snapshots a stopped broker left
/// (the broker removes them at start; `es-tools dump --online` reads one instead).
const SKIPPED_TREES: [&str; 3] = ["partitions/journal", "plugins/cache", "snapshots"];
/// Temp files of atomic replaces; a crash may leave them, the broker deletes them.
const TMP_SUFFIX: &str = ".tmp";

/// The part of a topic's metadata file a dump needs.
#[derive(Debug, Clone, Deserialize)]
struct TopicMetaLite {
    name: String,
    partitions: u32,
}

/// What a dump takes from a data directory.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Regular files, relative, `/`-separated, sorted.
    pub files: Vec<String>,
    /// Every directory above or around them (also empty ones), sorted.
    pub dirs: Vec<String>,
    /// Topic name -> partition count, of the topics dumped.
    pub topics: BTreeMap<String, u32>,
    /// Partition directories no topic owns (the broker deletes them at start).
    pub orphans: Vec<String>,
}

/// Lists what to dump from `data_dir`; with `prefix`, only user topics whose name
/// starts with it (and every internal topic and the broker-wide state).
pub fn scan(data_dir: &Path, prefix: Option<&str>) -> Result<Layout> {
    check_data_dir(data_dir)?;
    let all = read_topics(data_dir)?;
    let wanted = |name: &str| name.starts_with(INTERNAL_PREFIX) || prefix.is_none_or(|p| name.starts_with(p));
    let topics: BTreeMap<String, u32> =
        all.iter().filter(|(n, _)| wanted(n)).map(|(n, p)| (n.clone(), *p)).collect();
    let mut layout = Layout { topics, ..Layout::default() };
    walk(data_dir, "", &all, &mut layout)?;
    layout.files.sort();
    layout.dirs.sort();
    Ok(layout)
}

/// Refuses a directory that is not a broker's data directory, before anything
/// (even the lock file) is written into it.
pub fn check_data_dir(data_dir: &Path) -> Result<()> {
    let not_data =
        |reason: &str| ToolsError::NotADataDir { dir: data_dir.to_owned(), reason: reason.to_owned() };
    if !data_dir.is_dir() {
        return Err(not_data("no such directory"));
    }
    if !data_dir.join(TOPICS_DIR).is_dir() && !data_dir.join(PARTITIONS_DIR).is_dir() {
        return Err(not_data("it has neither a topics/ nor a partitions/ directory"));
    }
    Ok(())
}

/// The topic that owns partition directory `dir`, if any: `<topic>-<n>` with
/// `n` below the topic's partition count (a topic name may itself hold `-`).
pub fn owner<'a>(dir: &str, topics: &'a BTreeMap<String, u32>) -> Option<(&'a str, u32)> {
    let (name, n) = dir.rsplit_once('-')?;
    let n: u32 = n.parse().ok()?;
    let (name, count) = topics.get_key_value(name)?;
    (n < *count).then_some((name.as_str(), n))
}

fn read_topics(data_dir: &Path) -> Result<BTreeMap<String, u32>> {
    let dir = data_dir.join(TOPICS_DIR);
    let mut topics = BTreeMap::new();
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(topics);
    };
    for entry in entries {
        let path = entry.ctx(|| format!("listing {}", dir.display()))?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = fs::read(&path).ctx(|| format!("reading {}", path.display()))?;
        let meta: TopicMetaLite = serde_json::from_slice(&text).map_err(|e| ToolsError::NotADataDir {
            dir: data_dir.to_owned(),
            reason: format!("{} is not topic metadata: {e}", path.display()),
        })?;
        topics.insert(meta.name, meta.partitions);
    }
    Ok(topics)
}

/// Whether the file or directory `rel` is left out of the dump.
fn skipped(rel: &str, all: &BTreeMap<String, u32>, layout: &mut Layout) -> bool {
    if rel == LOCK_FILE || rel.ends_with(TMP_SUFFIX) || SKIPPED_TREES.contains(&rel) {
        return true;
    }
    if let Some(file) = rel.strip_prefix("topics/")
        && let Some(name) = file.strip_suffix(".json")
    {
        return !layout.topics.contains_key(name);
    }
    if let Some(dir) = rel.strip_prefix("partitions/")
        && !dir.contains('/')
        && dir != es_log::FORMAT_FILE
    {
        return match owner(dir, all) {
            Some((name, _)) => !layout.topics.contains_key(name),
            None => {
                layout.orphans.push(rel.to_owned());
                true
            }
        };
    }
    false
}

fn walk(root: &Path, rel: &str, all: &BTreeMap<String, u32>, layout: &mut Layout) -> Result<()> {
    let dir = root.join(rel);
    for entry in fs::read_dir(&dir).ctx(|| format!("listing {}", dir.display()))? {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            let path = entry.path().display().to_string();
            return Err(ToolsError::UnexpectedFileType { path, kind: "file whose name is not UTF-8" });
        };
        let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        if skipped(&child, all, layout) {
            continue;
        }
        let kind = entry.file_type().ctx(|| format!("reading {}", entry.path().display()))?;
        if kind.is_dir() {
            layout.dirs.push(child.clone());
            walk(root, &child, all, layout)?;
        } else if kind.is_file() {
            layout.files.push(child);
        } else {
            return Err(ToolsError::UnexpectedFileType { path: child, kind: kind_name(&kind) });
        }
    }
    Ok(())
}

fn kind_name(kind: &fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "symbolic link"
    } else if kind.is_fifo() {
        "fifo"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(dir: &Path, name: &str, partitions: u32) {
        fs::create_dir_all(dir.join("topics")).unwrap();
        let meta = format!(r#"{{"name":"{name}","partitions":{partitions},"config":{{}},"created_ms":0}}"#);
        fs::write(dir.join(format!("topics/{name}.json")), meta).unwrap();
        for n in 0..partitions {
            let p = dir.join(format!("partitions/{name}-{n}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("00000000000000000000.log"), b"").unwrap();
        }
    }

    #[test]
    fn the_prefix_keeps_matching_and_internal_topics_and_drops_runtime_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        topic(d, "orders", 2);
        topic(d, "order-lines", 1);
        topic(d, "users", 1);
        topic(d, "__es_offsets", 1);
        fs::write(d.join("LOCK"), b"").unwrap();
        fs::write(d.join("partitions/FORMAT"), b"es-log 2\n").unwrap();
        fs::create_dir_all(d.join("partitions/journal")).unwrap();
        fs::write(d.join("partitions/journal/00000000000000000001.journal"), b"").unwrap();
        fs::create_dir_all(d.join("plugins/cache")).unwrap();
        fs::write(d.join("plugins/cache/x.cwasm"), b"").unwrap();
        fs::write(d.join("topics/users.json.tmp"), b"").unwrap();
        fs::create_dir_all(d.join("partitions/gone-0")).unwrap();
        fs::create_dir_all(d.join("snapshots/0123456789abcdef/topics")).unwrap();
        fs::write(d.join("snapshots/0123456789abcdef/topics/orders.json"), b"{}").unwrap();
        let layout = scan(d, Some("order")).unwrap();
        assert_eq!(
            layout.files,
            [
                "partitions/FORMAT",
                "partitions/__es_offsets-0/00000000000000000000.log",
                "partitions/order-lines-0/00000000000000000000.log",
                "partitions/orders-0/00000000000000000000.log",
                "partitions/orders-1/00000000000000000000.log",
                "topics/__es_offsets.json",
                "topics/order-lines.json",
                "topics/orders.json",
            ]
        );
        assert!(layout.dirs.contains(&"plugins".to_owned()), "{:?}", layout.dirs);
        assert!(!layout.dirs.iter().any(|d| d.starts_with("snapshots")), "{:?}", layout.dirs);
        assert_eq!(layout.orphans, ["partitions/gone-0"]);
        assert_eq!(scan(d, None).unwrap().topics.len(), 4);
    }

    #[test]
    fn a_symlink_or_a_random_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = scan(dir.path(), None).unwrap_err();
        assert!(matches!(err, ToolsError::NotADataDir { .. }), "{err}");
        topic(dir.path(), "a", 1);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("topics/link")).unwrap();
        let err = scan(dir.path(), None).unwrap_err();
        assert!(matches!(err, ToolsError::UnexpectedFileType { kind: "symbolic link", .. }), "{err}");
    }

    #[test]
    fn owners_split_at_the_last_dash() {
        let topics = BTreeMap::from([("a-b".to_owned(), 3), ("a".to_owned(), 1)]);
        assert_eq!(owner("a-b-2", &topics), Some(("a-b", 2)));
        assert_eq!(owner("a-0", &topics), Some(("a", 0)));
        assert_eq!(owner("a-1", &topics), None);
        assert_eq!(owner("a-b-x", &topics), None);
    }
}
