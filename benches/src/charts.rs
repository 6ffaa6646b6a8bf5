//! SVG charts (plotters, SVG backend only, no system fonts): latency
//! percentiles per participant, and throughput by client count, one panel
//! per payload size.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use crate::aggregate::{Select, participants_of, values_of};
use crate::results::{LatencyFigures, Row, Scenario};

/// Chart size, pixels.
const SIZE: (u32, u32) = (1280, 560);
/// A percentile's label and how to read it.
type Percentile = (&'static str, fn(&LatencyFigures) -> f64);
/// One participant's line: its color index, name, and points.
type Series<'a> = (usize, &'a String, Vec<(f64, f64)>);

/// Percentiles on the latency chart's x axis.
const PERCENTILES: [Percentile; 4] = [
    ("p50", |l| l.p50_us),
    ("p90", |l| l.p90_us),
    ("p99", |l| l.p99_us),
    ("p99.9", |l| l.p999_us),
];

fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {error:?}")
}

fn color(index: usize) -> RGBColor {
    const COLORS: [RGBColor; 11] = [
        RGBColor(0x33, 0x33, 0x33),
        RGBColor(0x99, 0x99, 0x99),
        RGBColor(0xD6, 0x27, 0x28),
        RGBColor(0xFF, 0x7F, 0x0E),
        RGBColor(0x8C, 0x1C, 0x13),
        RGBColor(0xE3, 0x77, 0xC2),
        RGBColor(0x1F, 0x77, 0xB4),
        RGBColor(0x2C, 0xA0, 0x2C),
        RGBColor(0x17, 0xBE, 0xCF),
        RGBColor(0x94, 0x67, 0xBD),
        RGBColor(0xBC, 0xBD, 0x22),
    ];
    COLORS[index % COLORS.len()]
}

/// A category axis label: the name at whole positions, nothing between.
fn category(labels: &[String], x: f64) -> String {
    let nearest = x.round();
    if (x - nearest).abs() < 0.01 && nearest >= 0.0 {
        labels.get(nearest as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// `latency.svg`: for each size, p50 to p99.9 of every participant (log scale).
pub fn latency(path: &Path, rows: &[Row]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let sizes = values_of(rows, Scenario::Latency, |row| row.size);
    if sizes.is_empty() {
        return root.present().map_err(plot_error);
    }
    let names = participants_of(rows, Scenario::Latency);
    let labels: Vec<String> = PERCENTILES
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    for (panel, size) in root.split_evenly((1, sizes.len())).iter().zip(&sizes) {
        let series: Vec<Series<'_>> = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let select = Select::new(Scenario::Latency, name).size(*size);
                let points = PERCENTILES
                    .iter()
                    .enumerate()
                    .filter_map(|(x, (_, figure))| {
                        select
                            .stat(rows, |row| row.latency.as_ref().map(figure))
                            .map(|stat| (x as f64, stat.median))
                    })
                    .collect();
                (index, name, points)
            })
            .filter(|(_, _, points): &Series<'_>| !points.is_empty())
            .collect();
        let (low, high) = series
            .iter()
            .flat_map(|(_, _, points)| points.iter().map(|(_, y)| *y))
            .fold((f64::MAX, 0.0f64), |(low, high), y| {
                (low.min(y), high.max(y))
            });
        let (low, high) = if high > 0.0 {
            (low * 0.8, high * 1.25)
        } else {
            (1.0, 10.0)
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("Latency, {size} B, 1 client (µs, log)"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.3f64..3.3f64, (low..high).log_scale())
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_labels(PERCENTILES.len())
            .x_label_formatter(&|x| category(&labels, *x))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .y_desc("µs")
            .draw()
            .map_err(plot_error)?;
        for (index, name, points) in series {
            let style = color(index);
            chart
                .draw_series(LineSeries::new(points.clone(), style.stroke_width(2)))
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], style.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|point| Circle::new(point, 3, style.filled())),
                )
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)
}

/// `throughput.svg`: for each size, echoes/s of every participant by client count.
pub fn throughput(path: &Path, rows: &[Row]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let sizes = values_of(rows, Scenario::Throughput, |row| row.size);
    if sizes.is_empty() {
        return root.present().map_err(plot_error);
    }
    let names = participants_of(rows, Scenario::Throughput);
    let clients = values_of(rows, Scenario::Throughput, |row| row.clients);
    let labels: Vec<String> = clients
        .iter()
        .map(|&n| format!("{n} client{}", if n == 1 { "" } else { "s" }))
        .collect();
    let last = (clients.len().max(1) - 1) as f64;
    for (panel, size) in root.split_evenly((1, sizes.len())).iter().zip(&sizes) {
        let series: Vec<Series<'_>> = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let points = clients
                    .iter()
                    .enumerate()
                    .filter_map(|(x, &n)| {
                        Select::new(Scenario::Throughput, name)
                            .size(*size)
                            .clients(n)
                            .stat(rows, |row| Some(row.ops_per_sec))
                            .map(|stat| (x as f64, stat.median))
                    })
                    .collect();
                (index, name, points)
            })
            .filter(|(_, _, points): &Series<'_>| !points.is_empty())
            .collect();
        let high = series
            .iter()
            .flat_map(|(_, _, points)| points.iter().map(|(_, y)| *y))
            .fold(0.0f64, f64::max)
            .max(1.0);
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("Throughput, {size} B (echoes/s)"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.3f64..last + 0.3, 0f64..high * 1.1)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_labels(clients.len())
            .x_label_formatter(&|x| category(&labels, *x))
            .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
            .draw()
            .map_err(plot_error)?;
        for (index, name, points) in series {
            let style = color(index);
            chart
                .draw_series(LineSeries::new(points.clone(), style.stroke_width(2)))
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], style.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|point| Circle::new(point, 3, style.filled())),
                )
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)
}
