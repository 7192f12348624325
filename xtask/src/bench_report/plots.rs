//! SVG plots with `plotters`: line charts and grouped bar charts over categories on x,
//! every point the median of its repeats with a min–max whisker.
//!
//! Log axes are drawn on a linear coordinate of `log10(value)` with labels mapped back, which
//! keeps one chart type for every combination of axes.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::data::Stat;

/// One line (or bar colour) of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, value)`: x is the index of the category on the x axis.
    pub points: Vec<(f64, Stat)>,
}

/// One chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// The x axis' categories (block sizes, queue depths, percentiles, workloads), evenly
    /// spaced at 0, 1, 2, ...
    pub x: Vec<String>,
    /// Log10 y axis.
    pub y_log: bool,
    /// The data.
    pub series: Vec<Series>,
}

/// Chart size in pixels.
const SIZE: (u32, u32) = (860, 460);
/// Size of a two-chart figure.
const WIDE: (u32, u32) = (1240, 460);

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// Writes `chart` as lines with whiskers to `path`.
pub fn line_svg(path: &Path, chart: &Chart) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    draw(&root, chart, false)?;
    root.present().map_err(err)
}

/// Writes `chart` as grouped bars with whiskers to `path`.
pub fn bar_svg(path: &Path, chart: &Chart) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    draw(&root, chart, true)?;
    root.present().map_err(err)
}

/// Writes two line charts side by side to `path`.
pub fn line_pair_svg(path: &Path, left: &Chart, right: &Chart) -> Result<()> {
    let root = SVGBackend::new(path, WIDE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((1, 2));
    draw(&areas[0], left, false)?;
    draw(&areas[1], right, false)?;
    root.present().map_err(err)
}

fn ty(log: bool, v: f64) -> f64 {
    if log {
        v.max(1e-12).log10()
    } else {
        v
    }
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut s = format!("{x:.3}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    s + unit
}

/// The plotted y range: whiskers included, a margin around, zero-based for linear bars.
fn y_range(chart: &Chart, bars: bool) -> (f64, f64) {
    let vals = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .flat_map(|(_, st)| [st.min, st.max, st.median])
        .filter(|v| v.is_finite() && (!chart.y_log || *v > 0.0));
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    // Headroom above the data for the legend (about 17 px per series of ~370 px).
    let legend = ((chart.series.len() as f64 * 17.0 + 24.0) / 370.0).min(0.6);
    if chart.y_log {
        let (l, h) = (lo.log10().floor(), hi.log10());
        let h = if h > l { h } else { l + 1.0 };
        (l, h + (h - l) * legend / (1.0 - legend))
    } else {
        let top = if hi > 0.0 { hi / (1.0 - legend) } else { 1.0 };
        let bottom = if bars || lo >= 0.0 { 0.0 } else { lo * 1.12 };
        (bottom, top)
    }
}

fn x_range(chart: &Chart) -> (f64, f64) {
    (-0.5, chart.x.len().max(1) as f64 - 0.5)
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, chart: &Chart, bars: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (x0, x1) = x_range(chart);
    let (y0, y1) = y_range(chart, bars);
    let mut cc = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    let y_log = chart.y_log;
    let y_fmt = move |v: &f64| {
        if y_log {
            // Decades only: a label between them would read like a measured value.
            if (v - v.round()).abs() < 1e-6 {
                fmt_num(10f64.powf(v.round()))
            } else {
                String::new()
            }
        } else {
            fmt_num(*v)
        }
    };
    let cats = chart.x.clone();
    let x_fmt = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
            cats[i as usize].clone()
        } else {
            String::new()
        }
    };
    // Enough requested labels that every integer position gets a tick.
    let x_labels = chart.x.len().max(2) * 2 + 1;
    cc.configure_mesh()
        .x_desc(&chart.x_desc)
        .y_desc(&chart.y_desc)
        .x_labels(x_labels)
        .y_labels(if y_log {
            (y1 - y0).ceil() as usize + 1
        } else {
            8
        })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;

    let n_series = chart.series.len().max(1);
    for (i, s) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = ShapeStyle::from(&color).stroke_width(2);
        let mut pts: Vec<(f64, Stat)> = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Bars are offset within their category; lines sit on it.
        let offset = |x: f64| -> f64 {
            if bars {
                let w = 0.8 / n_series as f64;
                x - 0.4 + w * (i as f64 + 0.5)
            } else {
                x
            }
        };
        if bars {
            let w = 0.8 / n_series as f64;
            cc.draw_series(pts.iter().map(|(x, st)| {
                let c = offset(*x);
                Rectangle::new(
                    [(c - w / 2.0, y0), (c + w / 2.0, ty(y_log, st.median))],
                    color.filled(),
                )
            }))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled()));
        } else {
            cc.draw_series(LineSeries::new(
                pts.iter().map(|(x, st)| (offset(*x), ty(y_log, st.median))),
                style,
            ))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            cc.draw_series(
                pts.iter()
                    .map(|(x, st)| Circle::new((offset(*x), ty(y_log, st.median)), 3, style)),
            )
            .map_err(err)?;
        }
        // Min–max whiskers (drawn even when min == max: a visible dot marks the point).
        let whisker = ShapeStyle::from(&BLACK.mix(0.7)).stroke_width(1);
        cc.draw_series(pts.iter().filter(|(_, st)| st.n > 1).map(|(x, st)| {
            PathElement::new(
                vec![
                    (offset(*x), ty(y_log, st.min)),
                    (offset(*x), ty(y_log, st.max)),
                ],
                whisker,
            )
        }))
        .map_err(err)?;
    }
    cc.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_short() {
        assert_eq!(fmt_num(1500.0), "1.5k");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(2_000_000.0), "2M");
        assert_eq!(fmt_num(32.0), "32");
        assert_eq!(fmt_num(0.0), "0");
    }

    #[test]
    fn log_range_covers_whiskers() {
        let st = |m: f64| Stat {
            median: m,
            min: m / 2.0,
            max: m * 3.0,
            n: 3,
        };
        let c = Chart {
            title: "t".into(),
            x_desc: "x".into(),
            y_desc: "y".into(),
            x: vec!["1".into(), "32".into()],
            y_log: true,
            series: vec![Series {
                name: "a".into(),
                points: vec![(0.0, st(100.0)), (1.0, st(5000.0))],
            }],
        };
        let (lo, hi) = y_range(&c, false);
        assert_eq!(lo, 1.0, "a decade below the lowest whisker");
        assert!(
            hi > 15000f64.log10(),
            "above the highest whisker, with legend room"
        );
    }
}
