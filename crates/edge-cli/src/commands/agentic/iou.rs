//! The MLPerf harness's inline IoU scorer (`AgenticInferenceInlineScorer`): the
//! executables of a reply's `bash` tool calls, as a multiset of actions, against the
//! recorded answer's.
//!
//! Normalisation, as the harness does it:
//! - only calls whose function name is exactly `bash`; the arguments (a JSON string
//!   holding an object) give the command as `command`, else (Python's `or`: when
//!   `command` is missing or falsy) `cmd`;
//! - quoted spans (`'…'` without escapes, `"…"` with backslash escapes, `` `…` ``)
//!   become a space;
//! - stages split on `||`, `|`, `&&`, `;` and newline, each stage on whitespace;
//! - leading `VAR=value` assignments and `env time nice sudo exec command` dropped;
//! - the first token's basename, lower-cased, a trailing `.N` or `.N.N` removed
//!   (`python3.11` → `python3`);
//! - mapped through the alias table; anything not in it (`cd`, `echo`) is ignored.
//!
//! A turn scores Σ min(count) ÷ Σ max(count) over the two multisets; a turn whose
//! recorded answer has no action is not scored, a scored turn with no model action
//! scores 0. (The harness scores `sim_N` "workflow" conversations by intent codes
//! instead; the Edge coding data has none, so that rule is not ported.)
//!
//! Checked against the scorer's source (mlcommons/endpoints,
//! `src/inference_endpoint/evaluation/scoring.py`): its regexes are
//! `` '[^']*'|"(?:[^"\\]|\\.)*"|`[^`]*` `` for quotes, `\|\||\||&&|;|\n` for stages,
//! `^[A-Za-z_][A-Za-z0-9_]*=` for assignments and `\.\d+(\.\d+)?$` for versions.

use std::collections::BTreeMap;

/// Executable → action. A name alone maps to itself.
const ALIASES: &[(&str, &str)] = &[
    ("python", "python"),
    ("python2", "python"),
    ("python3", "python"),
    ("py", "python"),
    ("pip", "pip"),
    ("pip3", "pip"),
    ("pytest", "pytest"),
    ("pylint", "pylint"),
    ("sphinx-build", "sphinx"),
    ("sphinx-quickstart", "sphinx"),
    ("cython", "cython"),
    ("make", "make"),
    ("conda", "conda"),
    ("cat", "cat"),
    ("less", "cat"),
    ("more", "cat"),
    ("head", "head"),
    ("tail", "tail"),
    ("wc", "wc"),
    ("diff", "diff"),
    ("grep", "grep"),
    ("egrep", "grep"),
    ("fgrep", "grep"),
    ("rg", "grep"),
    ("ag", "grep"),
    ("sed", "sed"),
    ("awk", "awk"),
    ("gawk", "awk"),
    ("tr", "tr"),
    ("sort", "sort"),
    ("uniq", "uniq"),
    ("cut", "cut"),
    ("find", "find"),
    ("locate", "find"),
    ("ls", "ls"),
    ("xargs", "xargs"),
    ("cp", "cp"),
    ("mv", "mv"),
    ("rm", "rm"),
    ("mkdir", "mkdir"),
    ("touch", "touch"),
    ("tee", "tee"),
    ("source", "source"),
    (".", "source"),
    ("which", "which"),
    ("alias", "alias"),
    ("unset", "unset"),
    ("export", "export"),
    ("git", "git"),
    ("curl", "curl"),
    ("wget", "curl"),
    ("true", "true"),
    ("false", "false"),
    ("timeout", "timeout"),
    ("date", "date"),
    ("apt-get", "apt"),
    ("apt", "apt"),
    ("yum", "yum"),
];

/// Wrappers skipped before the executable.
const WRAPPERS: &[&str] = &["env", "time", "nice", "sudo", "exec", "command"];

/// `text` with every quoted span replaced by one space (an unclosed quote is kept).
fn blank_quotes(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '\'' | '`' => chars[i + 1..]
                .iter()
                .position(|&d| d == c)
                .map(|p| i + 1 + p),
            '"' => {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => break None,
                        // Python's `\\.` does not match a newline: no closing quote.
                        Some('\\') if chars.get(j + 1) == Some(&'\n') => break None,
                        Some('\\') => j += 2,
                        Some('"') => break Some(j),
                        Some(_) => j += 1,
                    }
                }
            }
            _ => None,
        };
        match close {
            Some(end) => {
                out.push(' ');
                i = end + 1;
            }
            None => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Whitespace as Python's `str.split()` sees it: Unicode white space plus the
/// information separators U+001C..U+001F.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `name=` at the start of a token.
fn is_assignment(token: &str) -> bool {
    let Some((name, _)) = token.split_once('=') else {
        return false;
    };
    let mut cs = name.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The basename, lower-cased, without a trailing `.N` or `.N.N`.
fn executable(token: &str) -> String {
    let base = token.rsplit('/').next().unwrap_or(token).to_lowercase();
    let mut s = base.as_str();
    for _ in 0..2 {
        match s.rsplit_once('.') {
            Some((head, tail))
                if !tail.is_empty()
                    && tail.bytes().all(|b| b.is_ascii_digit())
                    && !head.is_empty() =>
            {
                s = head
            }
            _ => break,
        }
    }
    s.to_string()
}

/// The actions of one shell command, in order.
pub fn command_actions(command: &str) -> Vec<&'static str> {
    let text = blank_quotes(command);
    let mut actions = Vec::new();
    // `||` and `|` both split, so splitting on `|` alone (and skipping the empty stage
    // between two bars) cuts the same stages.
    for stage in text.split(['|', ';', '\n']).flat_map(|s| s.split("&&")) {
        let mut tokens = stage
            .split(is_py_space)
            .filter(|t| !t.is_empty())
            .skip_while(|t| is_assignment(t) || WRAPPERS.contains(t));
        if let Some(first) = tokens.next() {
            let exe = executable(first);
            if let Some((_, action)) = ALIASES.iter().find(|(e, _)| *e == exe) {
                actions.push(*action);
            }
        }
    }
    actions
}

/// The actions of a reply's tool calls (`(name, arguments JSON string)` pairs).
pub fn call_actions<'a>(calls: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<&'static str> {
    let mut actions = Vec::new();
    for (name, arguments) in calls {
        if name != "bash" {
            continue;
        }
        let Ok(args) = serde_json::from_str::<serde_json::Value>(arguments) else {
            continue;
        };
        // Python's `args.get("command") or args.get("cmd")`: a falsy `command`
        // (missing, null, "", 0, false, [] or {}) falls back to `cmd`.
        let truthy = |v: &&serde_json::Value| match v {
            serde_json::Value::Null => false,
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
            serde_json::Value::String(s) => !s.is_empty(),
            serde_json::Value::Array(a) => !a.is_empty(),
            serde_json::Value::Object(o) => !o.is_empty(),
        };
        let command = args
            .get("command")
            .filter(truthy)
            .or_else(|| args.get("cmd"));
        if let Some(c) = command.and_then(|c| c.as_str()) {
            actions.extend(command_actions(c));
        }
    }
    actions
}

/// Multiset IoU of the model's actions against the recorded ones; `None` (not scored)
/// when the recorded answer has none.
pub fn score(model: &[&str], recorded: &[&str]) -> Option<f64> {
    if recorded.is_empty() {
        return None;
    }
    let count = |xs: &[&str]| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for x in xs {
            *m.entry(x.to_string()).or_default() += 1;
        }
        m
    };
    let (a, b) = (count(model), count(recorded));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let (mut inter, mut union) = (0, 0);
    for k in keys {
        let (x, y) = (
            a.get(k).copied().unwrap_or(0),
            b.get(k).copied().unwrap_or(0),
        );
        inter += x.min(y);
        union += x.max(y);
    }
    Some(inter as f64 / union as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_split_on_pipes_ands_semicolons_and_newlines() {
        assert_eq!(
            command_actions("cd /repo && ls -la | grep py; cat a.py\nwc -l x || true"),
            ["ls", "grep", "cat", "wc", "true"]
        );
        assert_eq!(
            command_actions("find . -name \"*.py\" | xargs grep -l foo | head -20"),
            ["find", "xargs", "head"]
        );
    }

    #[test]
    fn quoted_spans_are_blanked() {
        // The pipe and `&&` inside quotes do not split; what they held is not a command.
        assert_eq!(
            command_actions("grep 'a | sed x' f && echo \"b; rm -rf /\""),
            ["grep"]
        );
        assert_eq!(
            command_actions(r#"python -c "print(\"x | cat\")" | tail"#),
            ["python", "tail"]
        );
        assert_eq!(command_actions("echo `ls | wc`; git status"), ["git"]);
        // An unclosed quote is left as is; so is a double quote whose escape is a
        // backslash-newline (Python's `.` stops at newlines).
        assert_eq!(command_actions("grep 'oops | sed s"), ["grep", "sed"]);
        // (`ls"` keeps its quote, so it is no executable.)
        assert_eq!(command_actions("echo \"a\\\nls\" | wc"), ["wc"]);
        // Tabs and Python's other separators split tokens.
        assert_eq!(command_actions("\tsudo\u{1f}git\tstatus"), ["git"]);
    }

    #[test]
    fn assignments_and_wrappers_are_skipped() {
        assert_eq!(
            command_actions("PYTHONPATH=src DEBUG=1 python3 -m pytest"),
            ["python"]
        );
        assert_eq!(
            command_actions("sudo env A=1 time nice exec command make -j4"),
            ["make"]
        );
        assert_eq!(command_actions("1A=x ls"), Vec::<&str>::new());
    }

    #[test]
    fn basenames_versions_and_aliases() {
        assert_eq!(command_actions("/usr/bin/python3.11 x.py"), ["python"]);
        assert_eq!(command_actions("./venv/bin/Pip3 install ."), ["pip"]);
        assert_eq!(command_actions("python2.7.18 x"), ["python"]);
        assert_eq!(
            command_actions("rg foo; egrep x; less f; wget u; apt-get install y"),
            ["grep", "grep", "cat", "curl", "apt"]
        );
        assert_eq!(
            command_actions(". venv/bin/activate && source x"),
            ["source", "source"]
        );
        assert_eq!(command_actions("sphinx-build -b html docs out"), ["sphinx"]);
        assert_eq!(command_actions("cd /x; echo hi; vim f"), Vec::<&str>::new());
    }

    #[test]
    fn only_bash_calls_with_command_or_cmd_count() {
        let calls = [
            ("bash", r#"{"command": "ls && git diff"}"#),
            ("bash", r#"{"cmd": "cat x"}"#),
            ("shell", r#"{"command": "rm x"}"#),
            ("bash", "not json"),
            ("bash", r#"{"command": 3, "cmd": "rm x"}"#),
            ("bash", r#"{"command": "", "cmd": "head x"}"#),
            ("bash", r#"["ls"]"#),
        ];
        assert_eq!(call_actions(calls), ["ls", "git", "cat", "head"]);
    }

    #[test]
    fn multiset_iou() {
        assert_eq!(score(&["ls", "grep"], &["ls", "grep"]), Some(1.0));
        // {grep, grep, cat} vs {grep, sed}: ∩ = 1 (grep), ∪ = 2 grep + cat + sed = 4.
        assert_eq!(
            score(&["grep", "grep", "cat"], &["grep", "sed"]),
            Some(0.25)
        );
        assert_eq!(score(&[], &["git"]), Some(0.0));
        assert_eq!(score(&["git"], &[]), None);
        assert_eq!(score(&[], &[]), None);
    }
}
