//! BFCL v4 single-turn data: the category files (`BFCL_v4_<category>.json`, one JSON
//! object a line) and their ground truth (`possible_answer/BFCL_v4_<category>.json`),
//! as shipped in the `bfcl-eval` package's `bfcl_eval/data/` folder.

use super::BfclError;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// The language a category's checker converts values for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// JSON values checked with Python's types.
    Python,
    /// Values must be strings of Java literals.
    Java,
    /// Values must be strings of JavaScript literals.
    JavaScript,
}

/// A single-turn BFCL v4 category (the file name's suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// One function, one call (Python).
    SimplePython,
    /// One function, one call, Java literals.
    SimpleJava,
    /// One function, one call, JavaScript literals.
    SimpleJavascript,
    /// Several functions, one call to the right one.
    Multiple,
    /// One function, several calls in any order.
    Parallel,
    /// Several functions, several calls in any order.
    ParallelMultiple,
    /// No function fits: correct iff no call.
    Irrelevance,
    /// User-contributed, one call.
    LiveSimple,
    /// User-contributed, one call among several functions.
    LiveMultiple,
    /// User-contributed, several calls.
    LiveParallel,
    /// User-contributed, several calls among several functions.
    LiveParallelMultiple,
    /// User-contributed, no function fits: correct iff no call.
    LiveIrrelevance,
    /// User-contributed, some function fits: correct iff at least one call (not
    /// part of MLPerf's aggregates).
    LiveRelevance,
}

/// The MLPerf aggregate a category belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// `simple_*`, multiple, parallel, parallel_multiple.
    NonLive,
    /// `live_*` with ground truth.
    Live,
    /// irrelevance and live_irrelevance.
    Hallucination,
    /// live_relevance: reported alone.
    Unscored,
}

impl Category {
    /// Every single-turn category, in bfcl's order.
    pub const ALL: [Category; 13] = [
        Category::SimplePython,
        Category::SimpleJava,
        Category::SimpleJavascript,
        Category::Multiple,
        Category::Parallel,
        Category::ParallelMultiple,
        Category::LiveSimple,
        Category::LiveMultiple,
        Category::LiveParallel,
        Category::LiveParallelMultiple,
        Category::Irrelevance,
        Category::LiveIrrelevance,
        Category::LiveRelevance,
    ];

    /// The categories MLPerf scores: all but live_relevance, the last of
    /// [`Category::ALL`].
    pub const SCORED: &'static [Category] = match Self::ALL.split_last() {
        Some((_, scored)) => scored,
        None => &[],
    };

    /// bfcl's name, as in the file names and entry ids.
    pub fn name(self) -> &'static str {
        match self {
            Category::SimplePython => "simple_python",
            Category::SimpleJava => "simple_java",
            Category::SimpleJavascript => "simple_javascript",
            Category::Multiple => "multiple",
            Category::Parallel => "parallel",
            Category::ParallelMultiple => "parallel_multiple",
            Category::Irrelevance => "irrelevance",
            Category::LiveSimple => "live_simple",
            Category::LiveMultiple => "live_multiple",
            Category::LiveParallel => "live_parallel",
            Category::LiveParallelMultiple => "live_parallel_multiple",
            Category::LiveIrrelevance => "live_irrelevance",
            Category::LiveRelevance => "live_relevance",
        }
    }

    /// Parses a name; `simple` (bfcl v3's name) means simple_python.
    pub fn parse(name: &str) -> Option<Category> {
        let name = name.trim();
        if name == "simple" {
            return Some(Category::SimplePython);
        }
        Category::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The data file's name.
    pub fn file_name(self) -> String {
        format!("BFCL_v4_{}.json", self.name())
    }

    /// Whether entries carry ground truth (otherwise only "called or not" is scored).
    pub fn has_ground_truth(self) -> bool {
        !matches!(
            self,
            Category::Irrelevance | Category::LiveIrrelevance | Category::LiveRelevance
        )
    }

    /// The checker's language.
    pub fn language(self) -> Language {
        match self {
            Category::SimpleJava => Language::Java,
            Category::SimpleJavascript => Language::JavaScript,
            _ => Language::Python,
        }
    }

    /// The MLPerf aggregate.
    pub fn group(self) -> Group {
        match self {
            Category::LiveSimple
            | Category::LiveMultiple
            | Category::LiveParallel
            | Category::LiveParallelMultiple => Group::Live,
            Category::Irrelevance | Category::LiveIrrelevance => Group::Hallucination,
            Category::LiveRelevance => Group::Unscored,
            _ => Group::NonLive,
        }
    }

    /// MLPerf Edge's share of the category, in percent (per aggregate: non-live 62,
    /// live 10, hallucination 10).
    pub fn mlperf_percent(self) -> usize {
        match self.group() {
            Group::NonLive => 62,
            _ => 10,
        }
    }
}

/// Categories of 25 entries or fewer are taken whole by MLPerf's sampling.
pub const MLPERF_SUBSET_FLOOR: usize = 25;

/// How many entries of a category to take (always the first ones, as pandas'
/// `head(n)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// All of them.
    All,
    /// At most this many per category.
    Limit(usize),
    /// MLPerf Edge's accuracy set: `max(1, total × percent / 100)` entries, or all
    /// of a category of at most [`MLPERF_SUBSET_FLOOR`] (995 over the 12 scored
    /// categories).
    MlPerf,
}

impl Selection {
    /// How many of `total` entries of `category` are taken.
    pub fn count(self, category: Category, total: usize) -> usize {
        match self {
            Selection::All => total,
            Selection::Limit(n) => n.min(total),
            Selection::MlPerf if total <= MLPERF_SUBSET_FLOOR => total,
            Selection::MlPerf => (total * category.mlperf_percent() / 100).max(1),
        }
    }
}

/// One test entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// bfcl's id, e.g. `simple_python_0`.
    pub id: String,
    /// Its category.
    pub category: Category,
    /// The question: turns of `{role, content}` messages.
    pub question: Vec<Vec<Value>>,
    /// The function descriptions, as in the file (dotted names, Gorilla types).
    pub functions: Vec<Value>,
    /// The acceptable calls: one `{function: {param: [acceptable values]}}` per
    /// expected call; `None` for the irrelevance and relevance categories.
    pub ground_truth: Option<Vec<Value>>,
}

/// Loads the selected entries of each category from `dir` (the folder holding the
/// `BFCL_v4_*.json` files and `possible_answer/`), in the order given.
pub fn load(
    dir: &Path,
    categories: &[Category],
    selection: Selection,
) -> Result<Vec<Entry>, BfclError> {
    let mut out = Vec::new();
    for &category in categories {
        let path = dir.join(category.file_name());
        let lines = read_lines(&path)?;
        let take = selection.count(category, lines.len());
        let answers = match category.has_ground_truth() {
            true => Some(load_answers(
                &dir.join("possible_answer").join(category.file_name()),
            )?),
            false => None,
        };
        for (line_no, value) in lines.into_iter().take(take) {
            let mut entry =
                parse_entry(category, value).map_err(|reason| BfclError::Malformed {
                    path: path.clone(),
                    line: line_no,
                    reason,
                })?;
            if let Some(answers) = &answers {
                let truth = answers.get(&entry.id).ok_or_else(|| BfclError::Malformed {
                    path: path.clone(),
                    line: line_no,
                    reason: format!("no ground truth for `{}` in possible_answer/", entry.id),
                })?;
                entry.ground_truth = Some(truth.clone());
            }
            out.push(entry);
        }
    }
    Ok(out)
}

/// The file's non-blank lines, each parsed as JSON, with their 1-based numbers.
fn read_lines(path: &Path) -> Result<Vec<(usize, Value)>, BfclError> {
    let text = std::fs::read_to_string(path).map_err(|e| BfclError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| BfclError::Malformed {
            path: path.to_path_buf(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        out.push((i + 1, value));
    }
    Ok(out)
}

/// Ground truth by id.
fn load_answers(path: &Path) -> Result<HashMap<String, Vec<Value>>, BfclError> {
    let mut out = HashMap::new();
    for (line, value) in read_lines(path)? {
        let malformed = |reason: &str| BfclError::Malformed {
            path: path.to_path_buf(),
            line,
            reason: reason.to_string(),
        };
        let id = value["id"]
            .as_str()
            .ok_or_else(|| malformed("no string `id`"))?;
        let truth = value["ground_truth"]
            .as_array()
            .ok_or_else(|| malformed("no `ground_truth` list"))?;
        for call in truth {
            let ok = call
                .as_object()
                .is_some_and(|m| m.len() == 1 && m.values().all(Value::is_object));
            if !ok {
                return Err(malformed(
                    "a ground-truth call is not {function: {param: [values]}}",
                ));
            }
        }
        out.insert(id.to_string(), truth.clone());
    }
    Ok(out)
}

/// Checks the shape the checker relies on.
fn parse_entry(category: Category, value: Value) -> Result<Entry, String> {
    let id = value["id"].as_str().ok_or("no string `id`")?.to_string();
    let question = value["question"]
        .as_array()
        .ok_or("no `question` list")?
        .iter()
        .map(|turn| {
            turn.as_array()
                .cloned()
                .ok_or("a question turn is not a list of messages")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let functions = value["function"]
        .as_array()
        .ok_or("no `function` list")?
        .clone();
    for f in &functions {
        if !f["name"].is_string() {
            return Err("a function has no string `name`".into());
        }
        if !f["parameters"]["properties"].is_object() {
            return Err(format!(
                "function `{}` has no `parameters.properties` object",
                f["name"]
            ));
        }
    }
    Ok(Entry {
        id,
        category,
        question,
        functions,
        ground_truth: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlperf_selection_gives_995() {
        // The real files' sizes; MLPerf Edge's accuracy set has 995 entries.
        let sizes = [400, 100, 50, 200, 200, 200, 258, 1053, 16, 24, 240, 884];
        let total: usize = Category::SCORED
            .iter()
            .zip(sizes)
            .map(|(c, n)| Selection::MlPerf.count(*c, n))
            .sum();
        assert_eq!(total, 995);
        assert_eq!(Selection::MlPerf.count(Category::LiveSimple, 258), 25);
        assert_eq!(Selection::Limit(5).count(Category::Multiple, 3), 3);
    }

    #[test]
    fn names_round_trip() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.name()), Some(c));
        }
        assert_eq!(Category::parse("simple"), Some(Category::SimplePython));
        assert_eq!(Category::parse("nope"), None);
    }
}
