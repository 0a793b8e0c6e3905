//! `--plot FILE.svg`: the latency distribution of every target as a percentile curve, latency
//! against percentile on a logarithmic "1/(1-q)" axis (so 90 %, 99 %, 99.9 % are evenly spaced
//! and the tail is visible), one line per target, all rounds together.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use super::{
    BenchError,
    curve::{CurveReport, Measured},
};

/// The curve stops at this percentile (1/(1-q) = 10⁶).
const MAX_X: f64 = 1e6;
const SIZE: (u32, u32) = (960, 540);

/// Draws the curves of `(label, histogram in µs)` into the SVG file `path`.
pub fn draw(
    path: &Path,
    title: &str,
    curves: &[(&str, &Histogram<u64>)],
) -> Result<(), BenchError> {
    let failed = |e: &dyn std::fmt::Display| plot_error(path, e);
    let points: Vec<(&str, Vec<(f64, f64)>)> = curves
        .iter()
        .map(|(label, h)| (*label, percentile_curve(h)))
        .collect();
    let x_end = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold(100.0_f64, f64::max)
        .min(MAX_X);
    let y_end = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0.1_f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((1.0..x_end).log_scale(), 0.0..y_end)
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ms)")
        .x_label_formatter(&|x| percentile_label(*x))
        .draw()
        .map_err(|e| failed(&e))?;
    draw_lines(&mut chart, points, false).map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))
}

/// A chart with a logarithmic x axis, as both plots draw them.
type LogChart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<LogCoord<f64>, plotters::coord::types::RangedCoordf64>,
>;

/// Draws one line per `(label, points)` in its own colour (with a dot on each point if
/// `marked`), and their legend in the upper left corner.
fn draw_lines(
    chart: &mut LogChart<'_>,
    lines: Vec<(&str, Vec<(f64, f64)>)>,
    marked: bool,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    for (i, (label, points)) in lines.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if marked {
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
}

fn plot_error(path: &Path, error: &dyn std::fmt::Display) -> BenchError {
    BenchError::Plot {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}

/// `(1/(1-q), latency in ms)` along the histogram, up to `MAX_X`.
fn percentile_curve(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    if histogram.is_empty() {
        return Vec::new();
    }
    let mut curve: Vec<(f64, f64)> = histogram
        .iter_quantiles(4)
        .map(|v| {
            (
                v.quantile_iterated_to(),
                v.value_iterated_to() as f64 / 1000.0,
            )
        })
        .take_while(|&(q, _)| q < 1.0 && 1.0 / (1.0 - q) <= MAX_X)
        .map(|(q, ms)| (1.0 / (1.0 - q), ms))
        .collect();
    // The curve ends at the maximum, placed at the last percentile the data can show.
    let last = curve.last().map_or(1.0, |&(x, _)| x);
    let reach = (histogram.len() as f64).min(MAX_X).max(last);
    curve.push((reach, histogram.max() as f64 / 1000.0));
    curve
}

/// `50%`, `99%`, `99.9%` for x = 1/(1-q).
fn percentile_label(x: f64) -> String {
    let q = (1.0 - 1.0 / x) * 100.0;
    let text = format!("{q:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

/// Draws a cost curve into the SVG file `path`: three panels against what grows (a logarithmic
/// axis): CPU per request, p99, and the gateway's RSS; one line per kind of request.
pub fn draw_curve(path: &Path, curve: &CurveReport) -> Result<(), BenchError> {
    let failed = |e: &dyn std::fmt::Display| plot_error(path, e);
    let xs: Vec<f64> = curve.points.iter().map(|p| p.x as f64).collect();
    let (x_start, x_end) = (
        xs.iter().copied().fold(f64::MAX, f64::min).max(1.0) / 1.5,
        xs.iter().copied().fold(1.0, f64::max) * 1.5,
    );
    let root = SVGBackend::new(path, (960, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let root = root
        .titled(
            &format!("Switchyard's costs by {}", curve.x),
            ("sans-serif", 20),
        )
        .map_err(|e| failed(&e))?;
    let panels = root.split_evenly((3, 1));
    let call = |f: fn(&Measured) -> Option<f64>| -> Vec<(f64, f64)> {
        curve
            .points
            .iter()
            .filter_map(|p| Some((p.x as f64, f(&p.call)?)))
            .collect()
    };
    let list = |f: fn(&Measured) -> Option<f64>| -> Vec<(f64, f64)> {
        curve
            .points
            .iter()
            .filter_map(|p| Some((p.x as f64, f(p.list.as_ref()?)?)))
            .collect()
    };
    let cpu = |m: &Measured| m.cpu_ms_per_request.map(|ms| ms * 1000.0);
    let p99 = |m: &Measured| Some(m.p99_ms);
    let rss: Vec<(f64, f64)> = curve
        .points
        .iter()
        .map(|p| (p.x as f64, p.rss_kib as f64 / 1024.0))
        .collect();
    let series = [
        (
            "gateway CPU per request (µs)",
            vec![("tools/call", call(cpu)), ("tools/list", list(cpu))],
        ),
        (
            "p99 latency (ms)",
            vec![("tools/call", call(p99)), ("tools/list", list(p99))],
        ),
        ("gateway RSS (MiB)", vec![("RSS", rss)]),
    ];
    for (panel, (y_desc, lines)) in panels.iter().zip(series) {
        let y_end = lines
            .iter()
            .flat_map(|(_, points)| points.iter().map(|&(_, y)| y))
            .fold(0.001_f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(60)
            .build_cartesian_2d((x_start..x_end).log_scale(), 0.0..y_end)
            .map_err(|e| failed(&e))?;
        chart
            .configure_mesh()
            .x_desc(curve.x)
            .y_desc(y_desc)
            .x_label_formatter(&|x| count_label(*x))
            .draw()
            .map_err(|e| failed(&e))?;
        // A line measured at no step (`tools/list` but on the catalog curve) is left out.
        let lines = lines
            .into_iter()
            .filter(|(_, points)| !points.is_empty())
            .collect();
        draw_lines(&mut chart, lines, true).map_err(|e| failed(&e))?;
    }
    root.present().map_err(|e| failed(&e))
}

/// `1k`, `50k`, `200`: a count on the curve's axis.
fn count_label(x: f64) -> String {
    if x >= 1000.0 {
        format!("{}k", (x / 1000.0).round())
    } else {
        format!("{}", x.round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_labelled_plainly() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
    }

    #[test]
    fn the_curve_rises_to_the_maximum() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        for v in 1..=10_000 {
            histogram.record(v).unwrap();
        }
        let curve = percentile_curve(&histogram);
        assert!(
            curve
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
        // The histogram keeps 3 significant digits.
        assert!((curve.last().unwrap().1 - 10.0).abs() < 0.01);
    }

    #[test]
    fn draws_an_svg_with_a_line_per_target() {
        let mut a = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        let mut b = a.clone();
        for v in 1..=1000 {
            a.record(100 + v).unwrap();
            b.record(300 + v * 2).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.svg");
        draw(&path, "test", &[("direct", &a), ("gateway", &b)]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("direct") && svg.contains("gateway") && svg.contains("99%"));
    }
}
