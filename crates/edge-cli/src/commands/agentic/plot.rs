//! The report's chart, as a hand-written SVG: three panels over the turns of the run
//! (TTFT; prompt and cached tokens; tokens per target forward), one colour per report
//! so two runs can be read on one chart. Hand-written because the chart is three line
//! panels: a plotting crate would add more build time than this file has lines.

use super::metrics::TurnRecord;
use crate::cli_error::CliError;
use std::fmt::Write as _;
use std::path::Path;

/// One report's turns under a label.
pub struct Series<'a> {
    /// The legend's name for it.
    pub label: &'a str,
    /// Its turns, in run order.
    pub turns: &'a [TurnRecord],
}

const WIDTH: f64 = 960.0;
const PANEL_H: f64 = 210.0;
const GAP: f64 = 50.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 60.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// A round axis maximum at or above `x` (1, 2 or 5 times a power of ten).
fn nice_max(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&v| v >= x)
        .unwrap_or(10.0 * p)
}

fn label(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').to_string()
    }
}

/// One panel: a frame, y ticks, and a line per (series, figure).
struct Panel<'a> {
    title: &'a str,
    top: f64,
    turns: usize,
    y_max: f64,
    y_min: f64,
}

impl Panel<'_> {
    fn x(&self, i: usize) -> f64 {
        let span = (self.turns.max(2) - 1) as f64;
        LEFT + (WIDTH - LEFT - RIGHT) * i as f64 / span
    }

    fn y(&self, v: f64) -> f64 {
        let f = ((v - self.y_min) / (self.y_max - self.y_min)).clamp(0.0, 1.0);
        self.top + PANEL_H * (1.0 - f)
    }

    fn frame(&self, out: &mut String, bounds: &[usize]) {
        let (x0, x1, bottom) = (LEFT, WIDTH - RIGHT, self.top + PANEL_H);
        let _ = writeln!(
            out,
            r#"<text x="{LEFT}" y="{}" font-weight="bold">{}</text>"#,
            self.top - 8.0,
            self.title
        );
        for &b in bounds {
            let x = self.x(b);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{bottom}" stroke="#ddd"/>"##,
                self.top
            );
        }
        // Round steps: a maximum of 2·10^k in quarters, 1 or 5·10^k in fifths.
        let span = self.y_max - self.y_min;
        let lead = span / 10f64.powf(span.log10().floor());
        let steps = if (lead - 2.0).abs() < 1e-9 { 4 } else { 5 };
        for k in 0..=steps {
            let v = self.y_min + span * k as f64 / steps as f64;
            let y = self.y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 6.0,
                y + 4.0,
                label(v)
            );
        }
        let _ = writeln!(
            out,
            r##"<rect x="{x0}" y="{}" width="{}" height="{PANEL_H}" fill="none" stroke="#888"/>"##,
            self.top,
            x1 - x0
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">turn</text>"#,
            (x0 + x1) / 2.0,
            bottom + 30.0
        );
        for i in [0, self.turns.saturating_sub(1)] {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                self.x(i),
                bottom + 15.0,
                i + 1
            );
        }
    }

    /// A polyline through the known values; gaps (`None`) break it.
    fn line(&self, out: &mut String, values: &[Option<f64>], colour: &str, dashed: bool) {
        let dash = if dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        for run in values
            .iter()
            .enumerate()
            .collect::<Vec<_>>()
            .split(|(_, v)| v.is_none())
        {
            let pts: Vec<String> = run
                .iter()
                .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", self.x(*i), self.y(v))))
                .collect();
            match pts.len() {
                0 => {}
                1 => {
                    let (x, y) = pts[0].split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(out, r#"<circle cx="{x}" cy="{y}" r="2" fill="{colour}"/>"#);
                }
                _ => {
                    let _ = writeln!(
                        out,
                        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.2"{dash}/>"#,
                        pts.join(" ")
                    );
                }
            }
        }
    }
}

/// The chart of `series`, as SVG text.
pub fn svg(series: &[Series]) -> String {
    let turns = series.iter().map(|s| s.turns.len()).max().unwrap_or(0);
    let max_of = |f: &dyn Fn(&TurnRecord) -> Option<f64>| {
        series
            .iter()
            .flat_map(|s| s.turns.iter().filter_map(f))
            .fold(0.0f64, f64::max)
    };
    let height = TOP + 3.0 * (PANEL_H + GAP) + 10.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    // Legend: one entry per series; solid prompt tokens, dashed cached tokens.
    let mut x = LEFT;
    for (k, s) in series.iter().enumerate() {
        let c = COLOURS[k % COLOURS.len()];
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="18" width="14" height="4" fill="{c}"/><text x="{}" y="24">{}</text>"#,
            x + 20.0,
            escape(s.label)
        );
        x += 40.0 + 7.0 * s.label.len() as f64;
    }
    let _ = writeln!(
        out,
        r##"<text x="{x}" y="24" fill="#555">(tokens panel: solid = prompt, dashed = cached)</text>"##
    );
    // Conversation starts of the first series, as faint vertical lines.
    let bounds: Vec<usize> = series.first().map_or(Vec::new(), |s| {
        (1..s.turns.len())
            .filter(|&i| s.turns[i].conversation != s.turns[i - 1].conversation)
            .collect()
    });
    let accepted = max_of(&|t| t.mean_accepted);
    let panels = [
        ("TTFT (ms)", nice_max(max_of(&|t| t.ttft_ms)), 0.0),
        (
            "prompt and cached tokens",
            nice_max(max_of(&|t| Some(t.prompt_tokens as f64))),
            0.0,
        ),
        (
            "accepted tokens per target forward",
            nice_max(accepted.max(1.0)),
            0.0,
        ),
    ];
    for (p, (title, y_max, y_min)) in panels.into_iter().enumerate() {
        let panel = Panel {
            title,
            top: TOP + p as f64 * (PANEL_H + GAP),
            turns,
            y_max,
            y_min,
        };
        panel.frame(&mut out, &bounds);
        for (k, s) in series.iter().enumerate() {
            let c = COLOURS[k % COLOURS.len()];
            let col =
                |f: &dyn Fn(&TurnRecord) -> Option<f64>| s.turns.iter().map(f).collect::<Vec<_>>();
            match p {
                0 => panel.line(&mut out, &col(&|t| t.ttft_ms), c, false),
                1 => {
                    panel.line(&mut out, &col(&|t| Some(t.prompt_tokens as f64)), c, false);
                    panel.line(
                        &mut out,
                        &col(&|t| t.cached_tokens.map(|v| v as f64)),
                        c,
                        true,
                    );
                }
                _ => panel.line(&mut out, &col(&|t| t.mean_accepted), c, false),
            }
        }
        if p == 2 && accepted == 0.0 {
            let _ = writeln!(
                out,
                r##"<text x="{}" y="{}" text-anchor="middle" fill="#888">no speculation reported</text>"##,
                WIDTH / 2.0,
                panel.top + PANEL_H / 2.0
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes the chart of `series` to `path`.
pub fn write(path: &Path, series: &[Series]) -> Result<(), CliError> {
    std::fs::write(path, svg(series)).map_err(|e| CliError::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_and_lines() {
        assert_eq!(nice_max(730.0), 1000.0);
        assert_eq!(nice_max(1.3), 2.0);
        assert_eq!(nice_max(0.0), 1.0);
        let turn = |c: &str, ttft: Option<f64>| TurnRecord {
            conversation: c.into(),
            ttft_ms: ttft,
            prompt_tokens: 100,
            cached_tokens: Some(50),
            ..TurnRecord::default()
        };
        let a = [
            turn("x", Some(5.0)),
            turn("x", None),
            turn("y", Some(7.0)),
            turn("y", Some(8.0)),
        ];
        let s = svg(&[
            Series {
                label: "a<b",
                turns: &a,
            },
            Series {
                label: "b",
                turns: &a[..1],
            },
        ]);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a&lt;b"));
        assert!(s.contains("stroke-dasharray"));
        assert!(s.contains("no speculation reported"));
        // TTFT: one point before the gap, a line after it.
        assert!(s.contains("<circle"));
    }
}
