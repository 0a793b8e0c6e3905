//! `--plot FILE.svg`: the latency distribution of every target as a percentile curve, latency
//! against percentile on a logarithmic "1/(1-q)" axis (so 90 %, 99 %, 99.9 % are evenly spaced
//! and the tail is visible), one line per target, all rounds together.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use super::BenchError;

/// The curve stops at this percentile (1/(1-q) = 10⁶).
const MAX_X: f64 = 1e6;
const SIZE: (u32, u32) = (960, 540);

/// Draws the curves of `(label, histogram in µs)` into the SVG file `path`.
pub fn draw(
    path: &Path,
    title: &str,
    curves: &[(&str, &Histogram<u64>)],
) -> Result<(), BenchError> {
    let failed = |e: &dyn std::fmt::Display| BenchError::Plot {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
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
    for (i, (label, curve)) in points.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(curve, color.stroke_width(2)))
            .map_err(|e| failed(&e))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))
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
