//! Quick end-to-end checks of the public log API: append, read, restart.

use es_core::{LeaderEpoch, Record};
use es_log::{LogConfig, LogManager, ManagerOptions};

#[test]
fn append_read_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = LogManager::new(dir.path(), ManagerOptions::default()).unwrap();
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        let a = p
            .append_records(&[Record::keyed("k", "v1"), Record::keyed("k", "v2")], LeaderEpoch(1))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!((a.base_offset, a.last_offset), (0, 1));
        let b = p.append_records(&[Record::from_value("x")], LeaderEpoch(1)).unwrap().wait().unwrap();
        assert_eq!(b.base_offset, 2);
        let r = p.read(1, 1 << 20).unwrap();
        assert_eq!(r.high_watermark, 3);
        let offsets: Vec<u64> =
            r.batches().flat_map(|b| b.records().map(|r| r.unwrap().offset).collect::<Vec<_>>()).collect();
        assert_eq!(offsets, vec![0, 1, 2]);
        m.shutdown().unwrap();
    }
    let m = LogManager::new(dir.path(), ManagerOptions::default()).unwrap();
    let (p, report) = m.open_partition("t-0", LogConfig::default()).unwrap();
    assert!(report.trimmed.is_none());
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(p.read(3, 100).unwrap().data.len(), 0);
    assert_eq!(p.epoch_starts(), vec![(LeaderEpoch(1), 0)]);
}
