//! Figures drawn with plotters and an embedded font: stacked panels over one
//! x axis, lines, bars, limits and legends, and the axis numbers people read
//! (1-2-5 ticks, thousands separators).

use std::path::Path;
use std::sync::Once;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const FONT: &str = "dejavu";

pub fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_err() {
            eprintln!("throng-bench: the embedded font did not load; plots may lack text");
        }
    });
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// What a figure builder decided: draw it, leave it out and say why, or
/// nothing to say (the scenario has no such plot).
pub enum Fig {
    Draw(Figure),
    Skip(String),
    None,
}

impl Fig {
    pub fn and_then(self, f: impl FnOnce(Figure) -> Fig) -> Fig {
        match self {
            Fig::Draw(x) => f(x),
            other => other,
        }
    }
}

/// Tableau's ten colours: distinct lines for up to ten processes.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
pub const P50: RGBColor = PALETTE[0];
pub const P99: RGBColor = PALETTE[3];
const LIMIT: RGBColor = RGBColor(150, 0, 0);
const TOP: RGBColor = RGBColor(0, 130, 60);
const BAND: RGBColor = RGBColor(222, 242, 222);
const GRID: RGBColor = RGBColor(225, 225, 225);

/// A stack of panels over one x axis, so a moment (or a capacity step)
/// lines up across latency, throughput and server load.
pub struct Figure {
    pub title: String,
    pub x_desc: String,
    /// The x quantity is a count (sessions): integer ticks.
    pub x_int: bool,
    pub x_range: (f64, f64),
    /// Where the x ticks go (the capacity steps), else 1-2-5 ones.
    pub x_ticks: Option<Vec<f64>>,
    /// Shaded x spans (the capacity steps' measured windows), with their legend label.
    pub bands: Vec<(f64, f64)>,
    pub band_label: &'static str,
    /// A marked x (the top speed).
    pub mark: Option<f64>,
    pub panels: Vec<Panel>,
}

#[derive(Default)]
pub struct Panel {
    pub title: String,
    pub y_desc: String,
    /// The y quantity is a count: integer ticks.
    pub y_int: bool,
    pub lines: Vec<Line>,
    /// Horizontal limits, dashed, with their legend labels.
    pub limits: Vec<(f64, String)>,
    /// A histogram: bucket width and counts from x = 0, with its legend label.
    pub bars: Option<(f64, Vec<u64>, String)>,
    /// A fixed top of the y axis (percentages), else from the data.
    pub y_max: Option<f64>,
}

pub struct Line {
    pub label: String,
    pub color: RGBColor,
    /// Thick: the sum of several processes.
    pub bold: bool,
    /// A dot on each point (few points: one per capacity step).
    pub markers: bool,
    /// Each point's value written above it (a few steps whose values differ by orders of magnitude).
    pub values: bool,
    /// A missing y breaks the line: nothing was measured then.
    pub points: Vec<(f64, Option<f64>)>,
}

impl Line {
    pub fn new(label: impl Into<String>, color: RGBColor, points: Vec<(f64, Option<f64>)>) -> Line {
        Line { label: label.into(), color, bold: false, markers: false, values: false, points }
    }
}

impl Panel {
    pub fn new(title: impl Into<String>, y_desc: impl Into<String>, y_int: bool, lines: Vec<Line>) -> Panel {
        Panel { title: title.into(), y_desc: y_desc.into(), y_int, lines, ..Panel::default() }
    }

    fn y_top(&self) -> f64 {
        if let Some(m) = self.y_max {
            return m;
        }
        let lines = self.lines.iter().flat_map(|l| l.points.iter().filter_map(|p| p.1));
        let bars = self.bars.iter().flat_map(|b| b.1.iter().map(|&c| c as f64));
        let max = lines.chain(bars).chain(self.limits.iter().map(|l| l.0)).fold(0.0, f64::max);
        if max > 0.0 {
            max * 1.1
        } else {
            1.0
        }
    }

    /// Distinct x values with data (bars spread over their width).
    fn x_spread(&self) -> bool {
        if self.bars.as_ref().is_some_and(|b| !b.1.is_empty()) {
            return true;
        }
        let mut xs = self.lines.iter().flat_map(|l| l.points.iter().filter(|p| p.1.is_some()).map(|p| p.0));
        let first = xs.next();
        xs.any(|x| Some(x) != first)
    }
}

impl Figure {
    const WIDTH: u32 = 1100;
    const LEGEND: u32 = 250;
    const PANEL: u32 = 260;
    const TITLE: u32 = 40;

    /// The given ticks, else 1-2-5 ones.
    fn x_ticks(&self) -> Vec<f64> {
        match &self.x_ticks {
            Some(t) => t.clone(),
            None => nice_ticks(self.x_range.0, self.x_range.1, 12, self.x_int),
        }
    }

    /// Leaves out a figure with nothing to show or a single x value.
    pub fn check(self) -> Fig {
        let (x0, x1) = self.x_range;
        if self.panels.is_empty() {
            return Fig::Skip("no data".into());
        }
        // (NaN bounds fail too.)
        let spread = x1.partial_cmp(&x0) == Some(std::cmp::Ordering::Greater);
        if !spread || !self.panels.iter().any(Panel::x_spread) {
            return Fig::Skip("all data at a single x value".into());
        }
        Fig::Draw(self)
    }

    pub fn draw(&self, path: &Path) -> PlotResult {
        let height = Self::TITLE + Self::PANEL * self.panels.len() as u32;
        let root = BitMapBackend::new(path, (Self::WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(&self.title, (FONT, 20))?;
        for (area, p) in body.split_evenly((self.panels.len(), 1)).iter().zip(&self.panels) {
            let (chart, legend) = area.split_horizontally(Self::WIDTH - Self::LEGEND);
            self.draw_panel(&chart, p)?;
            self.draw_legend(&legend, p)?;
        }
        root.present()?;
        Ok(())
    }

    fn draw_panel(&self, area: &DrawingArea<BitMapBackend<'_>, Shift>, p: &Panel) -> PlotResult {
        let (x0, x1) = self.x_range;
        let y1 = p.y_top();
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, (FONT, 15))
            .margin(6)
            .margin_right(18)
            .x_label_area_size(40)
            .y_label_area_size(78)
            .build_cartesian_2d(Axis::new(x0, x1, self.x_ticks()), Axis::new(0.0, y1, nice_ticks(0.0, y1, 8, p.y_int)))?;
        let (xi, yi, xk, yk) = (self.x_int, p.y_int, x1 >= 10_000.0, y1 >= 10_000.0);
        let xf = move |v: &f64| tick(*v, xi, xk);
        let yf = move |v: &f64| tick(*v, yi, yk);
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(p.y_desc.as_str())
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .max_light_lines(0)
            .bold_line_style(GRID)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()?;
        chart.draw_series(self.bands.iter().map(|&(a, b)| Rectangle::new([(a, 0.0), (b, y1)], BAND.filled())))?;
        if let Some((w, counts, _)) = &p.bars {
            let bars = counts.iter().enumerate().filter(|(_, &c)| c > 0);
            chart.draw_series(bars.map(|(i, &c)| {
                let x = i as f64 * w;
                Rectangle::new([(x, 0.0), (x + w, c as f64)], P50.mix(0.75).filled())
            }))?;
        }
        for (y, _) in &p.limits {
            chart.draw_series(DashedLineSeries::new([(x0, *y), (x1, *y)], 10, 6, LIMIT.stroke_width(2)))?;
        }
        // The top speed is named in the title and the legend: text here would sit on the data.
        if let Some(x) = self.mark {
            chart.draw_series(DashedLineSeries::new([(x, 0.0), (x, y1)], 8, 5, TOP.stroke_width(2)))?;
        }
        for l in &p.lines {
            let style = l.color.stroke_width(if l.bold { 3 } else { 2 });
            for seg in segments(&l.points) {
                if l.markers || seg.len() == 1 {
                    chart.draw_series(seg.iter().map(|&pt| Circle::new(pt, 4, l.color.filled())))?;
                }
                if l.values {
                    let font = TextStyle::from((FONT, 12).into_font()).color(&l.color).pos(Pos::new(HPos::Center, VPos::Bottom));
                    chart.draw_series(seg.iter().map(|&(x, y)| {
                        let t = if y >= 10.0 { tick(y.round(), true, false) } else { tick((y * 10.0).round() / 10.0, false, false) };
                        EmptyElement::at((x, y)) + Text::new(t, (0, -7), font.clone())
                    }))?;
                }
                chart.draw_series(LineSeries::new(seg, style))?;
            }
        }
        Ok(())
    }

    /// The legend beside the panel (never over the data).
    fn draw_legend(&self, area: &DrawingArea<BitMapBackend<'_>, Shift>, p: &Panel) -> PlotResult {
        const MAX: usize = 11;
        let font = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let mut y = 40;
        let mut entries = 0;
        let mut next = |area: &DrawingArea<BitMapBackend<'_>, Shift>, label: &str, sample: &dyn Fn(i32) -> PlotResult| -> PlotResult {
            entries += 1;
            if entries <= MAX {
                sample(y)?;
                area.draw(&Text::new(label.to_owned(), (36, y), font.clone()))?;
                y += 19;
            }
            Ok(())
        };
        let dash = |c: RGBColor| {
            move |y: i32| -> PlotResult {
                area.draw(&PathElement::new(vec![(4, y), (13, y)], c.stroke_width(2)))?;
                area.draw(&PathElement::new(vec![(19, y), (28, y)], c.stroke_width(2)))?;
                Ok(())
            }
        };
        if let Some((_, _, label)) = &p.bars {
            next(area, label, &|y| Ok(area.draw(&Rectangle::new([(6, y - 5), (26, y + 5)], P50.mix(0.75).filled()))?))?;
        }
        for l in &p.lines {
            let (c, w, m) = (l.color, if l.bold { 3 } else { 2 }, l.markers);
            next(area, &l.label, &|y| {
                area.draw(&PathElement::new(vec![(4, y), (28, y)], c.stroke_width(w)))?;
                if m {
                    area.draw(&Circle::new((16, y), 4, c.filled()))?;
                }
                Ok(())
            })?;
        }
        for (_, label) in &p.limits {
            next(area, label, &dash(LIMIT))?;
        }
        if !self.bands.is_empty() {
            next(area, self.band_label, &|y| Ok(area.draw(&Rectangle::new([(4, y - 6), (28, y + 6)], BAND.filled()))?))?;
        }
        if let Some(x) = self.mark {
            next(area, &format!("top speed: {}", tick(x, true, false)), &dash(TOP))?;
        }
        if entries > MAX {
            area.draw(&Text::new(format!("… {} more", entries - MAX), (36, y), font.clone()))?;
        }
        Ok(())
    }
}

/// Splits a line where it has no value, so a gap shows as a gap.
fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut open = false;
    for &(x, y) in points {
        match y {
            Some(y) if open => out.last_mut().expect("open segment").push((x, y)),
            Some(y) => {
                out.push(vec![(x, y)]);
                open = true;
            }
            None => open = false,
        }
    }
    out
}

/// A linear axis whose ticks are ours (the capacity steps, 1-2-5 multiples,
/// whole numbers on count axes) rather than plotters' choice.
struct Axis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Axis {
    fn new(lo: f64, hi: f64, ticks: Vec<f64>) -> Axis {
        Axis { linear: (lo..hi).into(), ticks }
    }
}

impl Ranged for Axis {
    // Labels come from the mesh's formatter (`tick`).
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `x`
/// (histogram buckets people can read off an axis).
pub fn nice_step(x: f64) -> f64 {
    if !x.is_finite() || x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= x * (1.0 - 1e-9)).unwrap_or(10.0 * p)
}

/// Tick positions on [lo, hi]: the multiples of the smallest 1-2-5 step
/// that gives at most `max` of them; on a count axis the step is at least 1,
/// so no tick falls between two integers.
pub fn nice_ticks(lo: f64, hi: f64, max: usize, int: bool) -> Vec<f64> {
    let span = (hi - lo).max(1e-9);
    let ticks = |step: f64| {
        let first = (lo / step - 1e-9).ceil() as i64;
        (first..).map(move |i| i as f64 * step).take_while(move |&v| v <= hi + step * 1e-9)
    };
    // From a step that gives too many ticks up through 1-2-5 steps.
    let mut step = nice_step(span / (2 * max.max(2)) as f64);
    if int {
        step = step.max(1.0);
    }
    while ticks(step).count() > max.max(2) {
        step = nice_step(step * 1.5);
    }
    ticks(step).collect()
}

/// An axis tick. Counts (`int`) are whole numbers with thousands separators
/// ("12,500") and nothing between two integers; with `k` (an axis reaching
/// 10,000) thousands read "150k", "12.5k". Other quantities keep at most two
/// decimals, without trailing zeros ("0.25", "1,200").
pub fn tick(v: f64, int: bool, k: bool) -> String {
    if int && (v - v.round()).abs() > 1e-6 {
        return String::new();
    }
    let r = if int { v.round() } else { (v * 100.0).round() / 100.0 };
    if k && r.abs() >= 1000.0 && (r / 100.0).fract() == 0.0 {
        let t = r / 1000.0;
        return if t.fract() == 0.0 { format!("{t:.0}k") } else { format!("{t:.1}k") };
    }
    let sign = if r < 0.0 { "-" } else { "" };
    let whole = r.abs().trunc() as u64;
    let cents = ((r.abs() - whole as f64) * 100.0).round() as u64;
    let frac = match cents {
        0 => String::new(),
        c if c % 10 == 0 => format!(".{}", c / 10),
        c => format!(".{c:02}"),
    };
    format!("{sign}{}{frac}", thousands(whole))
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_integers_with_separators_or_thousands() {
        assert_eq!(tick(10_000.0, true, false), "10,000");
        assert_eq!(tick(1_234_567.0, true, false), "1,234,567");
        assert_eq!(tick(150_000.0, true, true), "150k");
        assert_eq!(tick(12_500.0, true, true), "12.5k");
        // Below 1,000 or not a multiple of 100: digits, not "k".
        assert_eq!(tick(500.0, true, true), "500");
        assert_eq!(tick(12_345.0, true, true), "12,345");
        assert_eq!(tick(0.0, true, true), "0");
        // Nothing between two integers on a count axis.
        assert_eq!(tick(2.5, true, false), "");
        assert_eq!(tick(3.0000000001, true, false), "3");
    }

    #[test]
    fn other_ticks_drop_trailing_zeros() {
        assert_eq!(tick(10_000.0, false, false), "10,000");
        assert_eq!(tick(0.30000000000000004, false, false), "0.3");
        assert_eq!(tick(12.25, false, false), "12.25");
        assert_eq!(tick(1200.5, false, false), "1,200.5");
        assert_eq!(tick(-5.0, false, false), "-5");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn ticks_are_1_2_5_multiples_and_whole_on_count_axes() {
        assert_eq!(nice_ticks(0.0, 2100.0, 12, true), (0..=10).map(|i| f64::from(i) * 200.0).collect::<Vec<_>>());
        assert_eq!(nice_ticks(0.0, 3.3, 6, true), vec![0.0, 1.0, 2.0, 3.0]);
        // A count axis never gets 0.5 steps, however short.
        assert_eq!(nice_ticks(0.0, 1.1, 6, true), vec![0.0, 1.0]);
        assert_eq!(nice_ticks(0.0, 1.1, 6, false), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(nice_ticks(12.0, 61.0, 6, false), vec![20.0, 30.0, 40.0, 50.0, 60.0]);
        assert!(nice_ticks(0.0, 78_750.0, 12, true).len() <= 12);
    }

    #[test]
    fn nice_steps_are_1_2_5() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.1), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(40.0), 50.0);
        assert!((nice_step(0.013) - 0.02).abs() < 1e-12);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn gaps_break_lines() {
        let pts = [(0.0, Some(1.0)), (1.0, Some(2.0)), (2.0, None), (3.0, Some(4.0)), (4.0, None)];
        assert_eq!(segments(&pts), vec![vec![(0.0, 1.0), (1.0, 2.0)], vec![(3.0, 4.0)]]);
        assert!(segments(&[(0.0, None)]).is_empty());
    }
}
