//! The report directory: `report.json` (every number), `report.md` (what a
//! person reads) and PNG plots drawn with plotters and an embedded font.
//!
//! - [`model`]: the results, as `report.json` holds them.
//! - [`markdown`]: `report.md` and the end-of-run summary.
//! - [`plots`]: which plots a report gets; [`chart`]: how a figure is drawn.

mod chart;
mod markdown;
mod model;
mod plots;

use std::path::Path;

use anyhow::Context;

pub use markdown::summary_text;
pub use model::*;

use crate::scenario::Scenario;

pub fn name(s: Scenario) -> &'static str {
    match s {
        Scenario::Connect => "connect",
        Scenario::Chat => "chat",
        Scenario::Broadcast => "broadcast",
        Scenario::Storm => "storm",
        Scenario::Capacity => "capacity",
        Scenario::Slow => "slow",
    }
}

pub fn write(dir: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(r)?)?;
    redraw(dir, r)
}

/// `report.md` and the plots from results (a fresh run's, or an old
/// report.json read back: `throng-bench plot --rewrite-md`).
pub fn redraw(dir: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (drawn, skipped) = plots::plots(dir, r).context("drawing plots")?;
    std::fs::write(dir.join("report.md"), markdown::markdown(r, &drawn, &skipped))?;
    Ok(())
}

/// The plots of a report read back (`throng-bench plot`) drawn into `dir`.
/// The report.md at `keep` (the report's own, if any) keeps its text, as
/// the run wrote it, and gets today's plots section; without one, a
/// report.md is written from the results.
pub fn replot(dir: &Path, r: &Results, keep: Option<&Path>) -> anyhow::Result<()> {
    let Some(keep) = keep else { return redraw(dir, r) };
    let old = std::fs::read_to_string(keep).with_context(|| format!("reading {}", keep.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (drawn, skipped) = plots::plots(dir, r).context("drawing plots")?;
    std::fs::write(dir.join("report.md"), markdown::with_plots(&old, &drawn, &skipped))?;
    Ok(())
}
