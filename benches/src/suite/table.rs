//! The plain-text table of `es-bench suite`, printed after every row ran.

use super::row::SuiteRow;

const HEADINGS: [&str; 11] = [
    "row",
    "conns",
    "partitions",
    "records/req",
    "in flight",
    "records/s",
    "MB/s",
    "p50 us",
    "p99 us",
    "vs raw",
    "target",
];

/// The table as text, one line per row, columns aligned.
pub fn render(rows: &[SuiteRow]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADINGS.iter().map(|h| (*h).to_owned()).collect()];
    lines.extend(rows.iter().map(cells));
    align(&lines)
}

fn cells(row: &SuiteRow) -> Vec<String> {
    let s = &row.shape;
    vec![
        row.label.clone(),
        s.connections.to_string(),
        s.partitions.to_string(),
        s.records_per_request.to_string(),
        s.in_flight.to_string(),
        format!("{:.0}", row.records_per_s),
        format!("{:.1}", row.mb_per_s),
        row.latency.p50_us.to_string(),
        row.latency.p99_us.to_string(),
        row.vs_raw.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
        target_cell(row),
    ]
}

/// `>= 0.8: met`, `>= 50000/s: NOT met`, or `-`.
pub fn target_cell(row: &SuiteRow) -> String {
    let Some(t) = &row.target else {
        return "-".to_owned();
    };
    let met = if t.met { "met" } else { "NOT met" };
    if t.is_ratio() { format!(">= {}: {met}", t.at_least) } else { format!(">= {}/s: {met}", t.at_least) }
}

/// First column left-aligned, the others right-aligned; every line has as many
/// cells as the first (the headings).
pub fn align(lines: &[Vec<String>]) -> String {
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| lines.iter().map(|l| l.get(c).map_or(0, String::len)).max().unwrap_or(0))
        .collect();
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
