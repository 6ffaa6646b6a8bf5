//! How the report writes its figures.

use crate::aggregate::Stat;

/// A number with thousands separators.
pub(super) fn thousands(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0 { format!("-{out}") } else { out }
}

/// A figure's spread over the runs: ±, half of (max − min) over the median.
pub(super) fn spread(stat: &Stat) -> String {
    if stat.runs < 2 {
        "1 run".to_owned()
    } else {
        format!("±{:.1}%", stat.spread * 100.0)
    }
}

/// A median with one decimal, or a dash.
pub(super) fn one(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| format!("{:.1}", stat.median))
}

/// A median with two decimals, or a dash.
pub(super) fn two(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| format!("{:.2}", stat.median))
}

/// A median, whole, with thousands separators, or a dash.
pub(super) fn whole(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| thousands(stat.median))
}

/// A payload size: `32 B`, `1 KiB`.
pub(super) fn size_name(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}
