//! From rows to the figures of the tables: the median of a cell's runs and
//! their spread (half of max − min, over the median), as the seed reports.

use crate::results::{Row, Scenario};

/// A figure over the runs of one cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// The median of the runs.
    pub median: f64,
    /// Half of (max − min), as a fraction of the median.
    pub spread: f64,
    /// How many runs it is made of.
    pub runs: usize,
}

impl Stat {
    /// The median and spread of `values` (none when empty).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        let spread = if median > 0.0 {
            (values[n - 1] - values[0]) / 2.0 / median
        } else {
            0.0
        };
        Some(Self {
            median,
            spread,
            runs: n,
        })
    }
}

/// Which rows a figure is read from.
#[derive(Debug, Clone, Copy)]
pub struct Select<'a> {
    /// The scenario.
    pub scenario: Scenario,
    /// The participant (or push/fan-out target) name.
    pub participant: &'a str,
    /// The payload size, if it matters.
    pub size: Option<usize>,
    /// The client count, if it matters.
    pub clients: Option<usize>,
}

impl<'a> Select<'a> {
    /// Rows of `scenario` for `participant`.
    pub fn new(scenario: Scenario, participant: &'a str) -> Self {
        Self {
            scenario,
            participant,
            size: None,
            clients: None,
        }
    }

    /// Only rows with this payload size.
    pub fn size(mut self, size: usize) -> Self {
        self.size = Some(size);
        self
    }

    /// Only rows with this client count.
    pub fn clients(mut self, clients: usize) -> Self {
        self.clients = Some(clients);
        self
    }

    /// The successful rows it selects.
    pub fn rows<'r>(&self, rows: &'r [Row]) -> Vec<&'r Row> {
        rows.iter()
            .filter(|row| {
                row.ok
                    && row.scenario == self.scenario
                    && row.participant == self.participant
                    && self.size.is_none_or(|size| row.size == size)
                    && self.clients.is_none_or(|clients| row.clients == clients)
            })
            .collect()
    }

    /// A figure over the selected runs.
    pub fn stat(&self, rows: &[Row], figure: impl Fn(&Row) -> Option<f64>) -> Option<Stat> {
        Stat::of(self.rows(rows).into_iter().filter_map(figure))
    }
}

/// Names of the participants (or targets) that have rows of `scenario`, in
/// the order they first appear.
pub fn participants_of(rows: &[Row], scenario: Scenario) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for row in rows.iter().filter(|row| row.scenario == scenario) {
        if !names.contains(&row.participant) {
            names.push(row.participant.clone());
        }
    }
    names
}

/// Sorted distinct values of `field` among rows of `scenario`.
pub fn values_of(rows: &[Row], scenario: Scenario, field: impl Fn(&Row) -> usize) -> Vec<usize> {
    let mut values: Vec<usize> = rows
        .iter()
        .filter(|row| row.scenario == scenario)
        .map(field)
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}
