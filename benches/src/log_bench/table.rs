//! The plain-text result table of `es-bench log`, printed after all rows ran.

use super::plan::{Row, RowSpec};

const HEADINGS: [&str; 11] = [
    "row",
    "partitions",
    "writers",
    "records/s",
    "median rec/s",
    "MB/s",
    "fsyncs/s",
    "appends/fsync",
    "p50 us",
    "p99 us",
    "vs raw",
];

/// The table as text, one line per row, columns aligned.
pub fn render(rows: &[Row]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADINGS.iter().map(|h| (*h).to_owned()).collect()];
    lines.extend(rows.iter().map(cells));
    align(&lines)
}

fn cells(row: &Row) -> Vec<String> {
    let (partitions, writers) = match row.spec {
        RowSpec::Raw { .. } => ("-".to_owned(), "1".to_owned()),
        RowSpec::Log { partitions, writers, .. } => (partitions.to_string(), writers.to_string()),
    };
    let f = &row.figures;
    vec![
        row.label.clone(),
        partitions,
        writers,
        format!("{:.0}", f.records_per_s),
        format!("{:.0}", row.median_records_per_s),
        format!("{:.1}", f.mb_per_s),
        format!("{:.1}", f.fsyncs_per_s),
        format!("{:.2}", f.batches_per_fsync),
        f.latency.p50_us.to_string(),
        f.latency.p99_us.to_string(),
        row.vs_raw.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
    ]
}

/// First column left-aligned, the others right-aligned.
fn align(lines: &[Vec<String>]) -> String {
    let widths: Vec<usize> =
        (0..HEADINGS.len()).map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in lines {
        let row: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        out.push_str(row.join("  ").trim_end());
        out.push('\n');
    }
    out
}
