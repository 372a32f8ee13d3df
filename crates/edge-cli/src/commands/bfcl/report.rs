//! Scores: per category, MLPerf's three aggregates, the normalized figure (their
//! mean) and the overall figure (the mean over samples), as the harness's
//! `BFCLv4Scorer` computes them; JSON and a printed table.

use super::checker::{Mismatch, ModelCall};
use super::data::{Category, Group};
use serde_json::{Value, json};

/// The verdict on one entry.
#[derive(Debug, Clone)]
pub struct SampleResult {
    /// bfcl's id.
    pub id: String,
    /// Its category.
    pub category: Category,
    /// Why it is wrong; `None` when correct.
    pub mismatch: Option<Mismatch>,
    /// The calls the model made.
    pub calls: Vec<ModelCall>,
}

impl SampleResult {
    /// Whether the answer is correct.
    pub fn correct(&self) -> bool {
        self.mismatch.is_none()
    }
}

/// One category's score.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoryScore {
    /// The category.
    pub category: Category,
    /// Entries run.
    pub total: usize,
    /// Entries correct.
    pub correct: usize,
}

impl CategoryScore {
    /// correct / total.
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.total.max(1) as f64
    }
}

/// Every verdict of a run.
#[derive(Debug, Clone, Default)]
pub struct BfclReport {
    /// One result per entry, in the order run.
    pub samples: Vec<SampleResult>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

impl BfclReport {
    /// Scores of the categories present, in bfcl's order.
    pub fn categories(&self) -> Vec<CategoryScore> {
        Category::ALL
            .into_iter()
            .filter_map(|category| {
                let of: Vec<&SampleResult> = self
                    .samples
                    .iter()
                    .filter(|s| s.category == category)
                    .collect();
                (!of.is_empty()).then(|| CategoryScore {
                    category,
                    total: of.len(),
                    correct: of.iter().filter(|s| s.correct()).count(),
                })
            })
            .collect()
    }

    /// An MLPerf aggregate over the categories present: non-live averages the
    /// `simple_*` categories into one figure, then averages it with the others;
    /// live weighs categories by their sizes; hallucination is the plain mean.
    pub fn group(&self, group: Group) -> Option<f64> {
        let cats: Vec<CategoryScore> = self
            .categories()
            .into_iter()
            .filter(|c| c.category.group() == group)
            .collect();
        match group {
            Group::NonLive => {
                let simple: Vec<f64> = cats
                    .iter()
                    .filter(|c| c.category.name().starts_with("simple_"))
                    .map(CategoryScore::accuracy)
                    .collect();
                let mut top: Vec<f64> = mean(&simple).into_iter().collect();
                top.extend(
                    cats.iter()
                        .filter(|c| !c.category.name().starts_with("simple_"))
                        .map(CategoryScore::accuracy),
                );
                mean(&top)
            }
            Group::Live => {
                let total: usize = cats.iter().map(|c| c.total).sum();
                let correct: usize = cats.iter().map(|c| c.correct).sum();
                (total > 0).then(|| correct as f64 / total as f64)
            }
            Group::Hallucination => {
                mean(&cats.iter().map(CategoryScore::accuracy).collect::<Vec<_>>())
            }
            Group::Unscored => None,
        }
    }

    /// The mean of the aggregates present (MLPerf's `normalized_single_turn_score`).
    pub fn normalized(&self) -> Option<f64> {
        let groups: Vec<f64> = [Group::NonLive, Group::Live, Group::Hallucination]
            .into_iter()
            .filter_map(|g| self.group(g))
            .collect();
        mean(&groups)
    }

    /// Correct samples over all samples (MLPerf's `overall_accuracy`).
    pub fn overall(&self) -> Option<f64> {
        let n = self.samples.len();
        (n > 0).then(|| self.samples.iter().filter(|s| s.correct()).count() as f64 / n as f64)
    }

    /// The report as JSON: figures in percent, per-category counts, per-sample
    /// verdicts (with the calls made).
    pub fn to_json(&self) -> Value {
        let pct = |v: Option<f64>| v.map(|v| v * 100.0);
        let categories: serde_json::Map<String, Value> = self
            .categories()
            .iter()
            .map(|c| {
                let v = json!({"total": c.total, "correct": c.correct, "accuracy": c.accuracy() * 100.0});
                (c.category.name().to_string(), v)
            })
            .collect();
        let samples: Vec<Value> = self
            .samples
            .iter()
            .map(|s| {
                let calls: Vec<Value> = s
                    .calls
                    .iter()
                    .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                    .collect();
                json!({
                    "id": s.id,
                    "category": s.category.name(),
                    "correct": s.correct(),
                    "kind": s.mismatch.as_ref().map(Mismatch::kind),
                    "reason": s.mismatch.as_ref().map(ToString::to_string),
                    "calls": calls,
                })
            })
            .collect();
        json!({
            "total_samples": self.samples.len(),
            "overall_accuracy": pct(self.overall()),
            "normalized_single_turn_score": pct(self.normalized()),
            "aggregates": {
                "non_live": pct(self.group(Group::NonLive)),
                "live": pct(self.group(Group::Live)),
                "hallucination": pct(self.group(Group::Hallucination)),
            },
            "categories": categories,
            "samples": samples,
        })
    }

    /// A table of the scores, with the most frequent failure kinds.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<24} {:>6} {:>8} {:>9}\n",
            "category", "total", "correct", "accuracy"
        );
        for c in self.categories() {
            out += &format!(
                "{:<24} {:>6} {:>8} {:>8.2}%\n",
                c.category.name(),
                c.total,
                c.correct,
                c.accuracy() * 100.0
            );
        }
        let line = |name: &str, v: Option<f64>| match v {
            Some(v) => format!("{name:<24} {:>24.2}%\n", v * 100.0),
            None => String::new(),
        };
        out += &line("non_live", self.group(Group::NonLive));
        out += &line("live", self.group(Group::Live));
        out += &line("hallucination", self.group(Group::Hallucination));
        out += &line("normalized", self.normalized());
        out += &line("overall", self.overall());
        let mut kinds: Vec<(&'static str, usize)> = Vec::new();
        for m in self.samples.iter().filter_map(|s| s.mismatch.as_ref()) {
            match kinds.iter_mut().find(|(k, _)| *k == m.kind()) {
                Some((_, n)) => *n += 1,
                None => kinds.push((m.kind(), 1)),
            }
        }
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        if !kinds.is_empty() {
            out += "failures:";
            for (k, n) in kinds {
                out += &format!(" {k} {n};");
            }
            out.pop();
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(category: Category, correct: bool) -> SampleResult {
        SampleResult {
            id: format!("{}_0", category.name()),
            category,
            mismatch: (!correct).then_some(Mismatch::NoCall),
            calls: Vec::new(),
        }
    }

    #[test]
    fn aggregates_follow_the_harness() {
        let mut r = BfclReport::default();
        // simple_python 1/2, simple_java 0/1, multiple 1/1: non-live = mean(mean(.5, 0), 1).
        r.samples.push(sample(Category::SimplePython, true));
        r.samples.push(sample(Category::SimplePython, false));
        r.samples.push(sample(Category::SimpleJava, false));
        r.samples.push(sample(Category::Multiple, true));
        // live: weighted, 2/3.
        r.samples.push(sample(Category::LiveSimple, true));
        r.samples.push(sample(Category::LiveMultiple, true));
        r.samples.push(sample(Category::LiveMultiple, false));
        // hallucination: mean(1, 0).
        r.samples.push(sample(Category::Irrelevance, true));
        r.samples.push(sample(Category::LiveIrrelevance, false));
        let close =
            |a: Option<f64>, b: f64| assert!((a.unwrap() - b).abs() < 1e-12, "{a:?} vs {b}");
        close(r.group(Group::NonLive), (0.25 + 1.0) / 2.0);
        close(r.group(Group::Live), 2.0 / 3.0);
        close(r.group(Group::Hallucination), 0.5);
        close(r.normalized(), (0.625 + 2.0 / 3.0 + 0.5) / 3.0);
        close(r.overall(), 5.0 / 9.0);
        let j = r.to_json();
        assert_eq!(j["categories"]["simple_python"]["correct"], 1);
        assert_eq!(j["samples"][1]["kind"], "relevance:no_call");
        assert!(r.table().contains("failures: relevance:no_call 4"));
    }
}
