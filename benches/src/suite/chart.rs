//! The suite's PNG: one horizontal bar per row (records/s), a red tick where a
//! row's target lies, and the figures as text. Text needs a TrueType font from
//! /usr/share/fonts; without one the bars are drawn alone and a note is printed.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use super::row::SuiteRow;

const WIDTH: u32 = 1100;
const ROW_H: i32 = 46;
const TOP: i32 = 56;
const LABEL_W: i32 = 330;
const RIGHT_PAD: i32 = 250;
const FAMILY: &str = "sans-serif";
/// Tried first; any other .ttf under /usr/share/fonts after that.
const PREFERRED_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Per-row bar colours by kind.
fn colour(kind: &str) -> RGBColor {
    match kind {
        "raw_disk" => RGBColor(140, 140, 140),
        "binary_produce" => RGBColor(31, 119, 180),
        "http_produce" => RGBColor(255, 127, 14),
        "binary_consume" | "binary_fetch_no_decode" => RGBColor(44, 160, 44),
        _ => RGBColor(148, 103, 189),
    }
}

/// Loads and registers a font; `None` (and the reason) when there is none.
fn load_font() -> std::result::Result<PathBuf, String> {
    let path = if Path::new(PREFERRED_FONT).is_file() {
        PathBuf::from(PREFERRED_FONT)
    } else {
        find_ttf(Path::new("/usr/share/fonts"), 4).ok_or("no .ttf font under /usr/share/fonts")?
    };
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| format!("{} is not a usable font", path.display()))?;
    Ok(path)
}

/// The first .ttf file found under `dir`, at most `depth` levels down.
fn find_ttf(dir: &Path, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in &entries {
        if p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("ttf")) {
            return Some(p.clone());
        }
    }
    if depth == 0 {
        return None;
    }
    entries.iter().filter(|p| p.is_dir()).find_map(|p| find_ttf(p, depth - 1))
}

/// The records/s a row must reach, if it has a target. A ratio target is turned
/// into records/s through the baseline it divides by (records/s over the ratio).
fn threshold(row: &SuiteRow) -> Option<f64> {
    let t = row.target.as_ref()?;
    if !t.is_ratio() {
        return Some(t.at_least);
    }
    (t.value > 0.0).then(|| t.at_least * row.records_per_s / t.value)
}

/// Draws the chart to `path`. `title` goes on top when a font exists.
pub fn draw(path: &Path, title: &str, rows: &[SuiteRow]) -> Result<()> {
    let font = match load_font() {
        Ok(_) => true,
        Err(why) => {
            println!("note: the chart has no text ({why})");
            false
        }
    };
    let height = (TOP + ROW_H * rows.len() as i32 + 40) as u32;
    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let max =
        rows.iter().flat_map(|r| [Some(r.records_per_s), threshold(r)]).flatten().fold(1.0_f64, f64::max);
    let bar_w = WIDTH as i32 - LABEL_W - RIGHT_PAD;
    let x_of = |v: f64| LABEL_W + (v / max * f64::from(bar_w)).round() as i32;
    let text = |size: u32| (FAMILY, size).into_font().color(&BLACK);
    if font {
        root.draw(&Text::new(title.to_owned(), (12, 14), text(18))).map_err(err)?;
    }
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as i32;
        let end = x_of(row.records_per_s).max(LABEL_W + 1);
        root.draw(&Rectangle::new([(LABEL_W, y + 6), (end, y + ROW_H - 6)], colour(row.shape.kind).filled()))
            .map_err(err)?;
        if let Some(t) = threshold(row) {
            let x = x_of(t);
            root.draw(&Rectangle::new([(x - 1, y + 1), (x + 1, y + ROW_H - 1)], RED.filled()))
                .map_err(err)?;
        }
        if font {
            root.draw(&Text::new(row.label.clone(), (12, y + ROW_H / 2 - 8), text(15))).map_err(err)?;
            let mut figures = format!("{} rec/s, {:.0} MB/s", thousands(row.records_per_s), row.mb_per_s);
            if let Some(r) = row.vs_raw {
                figures.push_str(&format!(", {r:.2}x raw"));
            } else if let Some(t) = row.target.as_ref().filter(|t| t.is_ratio()) {
                figures.push_str(&format!(", {:.2} {}", t.value, t.figure));
            }
            root.draw(&Text::new(figures, (end + 8, y + ROW_H / 2 - 8), text(14))).map_err(err)?;
        }
    }
    if font {
        let legend = "bars: records/s (fsync on, 256 B records); red tick: the issue's target for the row";
        root.draw(&Text::new(legend, (12, height as i32 - 28), text(13))).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// 1234567.8 as `1,234,568`.
pub fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
