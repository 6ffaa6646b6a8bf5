//! The report's prose, kept in the Markdown files beside this one: a
//! section's heading and opening paragraphs, or a list. A word in braces,
//! such as `{runs}`, is a placeholder for a figure, filled by [`fill`].

use std::fmt::Write as _;

/// The title and what every figure covers: `{mode}`.
pub(super) const INTRO: &str = include_str!("intro.md");
/// How the echo workloads measure: `{latency_warmup}`, `{latency_calls}`,
/// `{client_counts}`, `{throughput_warmup}`, `{throughput_window}`,
/// `{throughput_runs}`, `{latency_runs}`, `{runs}`.
pub(super) const METHOD: &str = include_str!("method.md");
/// What pushes and what reads in the push scenario.
pub(super) const PUSH: &str = include_str!("push.md");
/// How a broadcast reaches the fan-out's members: `{members}`.
pub(super) const FANOUT: &str = include_str!("fanout.md");
/// How the crowd's memory is read: `{connections}`.
pub(super) const CROWD: &str = include_str!("crowd.md");
/// The backplane's nodes, members and cases.
pub(super) const BACKPLANE: &str = include_str!("backplane.md");
/// What the backplane's throughput cells count.
pub(super) const BACKPLANE_THROUGHPUT: &str = include_str!("backplane-throughput.md");
/// What the backplane's latency cells time: `{rate}`, `{members}`.
pub(super) const BACKPLANE_LATENCY: &str = include_str!("backplane-latency.md");
/// Who the ranking leaves out.
pub(super) const WINS: &str = include_str!("wins.md");
/// Where the budgets' ratios come from.
pub(super) const BUDGETS: &str = include_str!("budgets.md");
/// The caveat of a loaded machine: `{loaded}`, `{cells}`, `{cores}`,
/// `{highest}`.
pub(super) const CAVEAT_LOAD: &str = include_str!("caveat-load.md");
/// The caveats every report carries.
pub(super) const CAVEATS: &str = include_str!("caveats.md");

/// `text` with each `{name}` replaced by its value.
pub(super) fn fill(text: &str, values: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (name, value) in values {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    text
}

/// Appends `text` and a blank line.
pub(super) fn paragraph(out: &mut String, text: &str) {
    let _ = writeln!(out, "{}\n", text.trim_end());
}

/// Appends `text` (a list that more items follow), with no blank line.
pub(super) fn lines(out: &mut String, text: &str) {
    let _ = writeln!(out, "{}", text.trim_end());
}
