//! What the offered tools allow a call to say: the function names, each function's
//! parameter names and the form of each parameter's value, compiled once per request
//! from its OpenAI `tools`.

use super::super::types::{JsonType, declared_types};
use super::nodes::{NodeId, Nodes};
use serde_json::Value;

/// The text a parameter's value may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ValueRule {
    /// Any text without the format's tags (strings, and types not understood).
    Text,
    /// A JSON integer.
    Integer,
    /// A JSON number.
    Number,
    /// One of these texts, sorted (`enum`, `boolean`, `null`).
    OneOf(Vec<Vec<u8>>),
    /// A JSON value of this schema (arrays, objects, unions of non-string types).
    Json(NodeId),
}

impl ValueRule {
    /// The rule for one property schema.
    fn of(prop: &Value, nodes: &mut Nodes) -> ValueRule {
        if let Some(values) = prop.get("enum").and_then(Value::as_array) {
            // The XML format writes strings raw and everything else as JSON.
            let mut texts: Vec<Vec<u8>> = (values.iter())
                .map(|v| match v {
                    Value::String(s) => s.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                })
                .collect();
            texts.sort();
            texts.dedup();
            if !texts.is_empty() {
                return ValueRule::OneOf(texts);
            }
        }
        let Some(types) = declared_types(prop) else {
            return ValueRule::Text;
        };
        if types.contains(&JsonType::String) {
            return ValueRule::Text;
        }
        match types.as_slice() {
            [JsonType::Integer] => ValueRule::Integer,
            [JsonType::Number] => ValueRule::Number,
            [JsonType::Boolean] => ValueRule::OneOf(vec![b"false".to_vec(), b"true".to_vec()]),
            [JsonType::Null] => ValueRule::OneOf(vec![b"null".to_vec()]),
            _ => ValueRule::Json(nodes.compile(prop)),
        }
    }
}

/// One declared parameter.
#[derive(Clone, Debug)]
pub(super) struct ParamRule {
    pub name: Vec<u8>,
    pub value: ValueRule,
}

/// One offered function.
#[derive(Clone, Debug)]
pub(super) struct FunctionRule {
    pub name: Vec<u8>,
    /// Its parameters sorted by name; `None` when the schema declares no `properties`
    /// (any names, text values).
    pub params: Option<Vec<ParamRule>>,
    /// Bit `i` set when `params[i]` is required (only the first 64 are tracked).
    pub required: u64,
}

/// Most parameters of one function whose use is tracked (one bit each).
pub(super) const TRACKED_PARAMS: usize = 64;

impl FunctionRule {
    /// The rule of one `tools` entry (`None` when it has no name).
    pub(super) fn of(tool: &Value, nodes: &mut Nodes) -> Option<FunctionRule> {
        let f = tool.get("function").unwrap_or(tool);
        let name = f.get("name")?.as_str()?.as_bytes().to_vec();
        let schema = f.get("parameters");
        let params = schema
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object)
            .map(|props| {
                let mut params: Vec<ParamRule> = (props.iter())
                    .map(|(k, v)| ParamRule {
                        name: k.as_bytes().to_vec(),
                        value: ValueRule::of(v, nodes),
                    })
                    .collect();
                params.sort_by(|a, b| a.name.cmp(&b.name));
                params
            });
        let mut required = 0u64;
        let listed = schema
            .and_then(|p| p.get("required"))
            .and_then(Value::as_array);
        if let (Some(params), Some(listed)) = (&params, listed) {
            for r in listed.iter().filter_map(Value::as_str) {
                let at = params.binary_search_by(|p| p.name.as_slice().cmp(r.as_bytes()));
                if let Ok(i) = at
                    && i < TRACKED_PARAMS
                {
                    required |= 1 << i;
                }
            }
        }
        Some(FunctionRule {
            name,
            params,
            required,
        })
    }
}

/// An entry of a sorted list of names or texts.
pub(super) trait Keyed {
    fn key(&self) -> &[u8];
}

impl Keyed for Vec<u8> {
    fn key(&self) -> &[u8] {
        self
    }
}

impl<T> Keyed for (Vec<u8>, T) {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

impl Keyed for ParamRule {
    fn key(&self) -> &[u8] {
        &self.name
    }
}

impl Keyed for FunctionRule {
    fn key(&self) -> &[u8] {
        &self.name
    }
}

/// The entries of a sorted list of byte strings that extend a prefix: a range
/// `lo..hi` of indices and the prefix's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Prefix {
    pub lo: u16,
    pub hi: u16,
    pub depth: u16,
}

impl Prefix {
    /// The empty prefix of a list of `n` entries.
    pub(super) fn all(n: usize) -> Prefix {
        Prefix {
            lo: 0,
            hi: n.min(u16::MAX as usize) as u16,
            depth: 0,
        }
    }

    /// The entries that continue with `b`; `None` when none does.
    pub(super) fn step<T: Keyed>(self, list: &[T], b: u8) -> Option<Prefix> {
        let d = self.depth as usize;
        let range = &list[self.lo as usize..self.hi as usize];
        // Sorted, so the entries equal to the prefix come first, then by byte `d`.
        let below = |strict: bool| {
            range.partition_point(|e| {
                let k = e.key();
                k.len() <= d || if strict { k[d] < b } else { k[d] <= b }
            })
        };
        let (lo, hi) = (below(true), below(false));
        (lo < hi).then(|| Prefix {
            lo: self.lo + lo as u16,
            hi: self.lo + hi as u16,
            depth: self.depth + 1,
        })
    }

    /// The index of the entry equal to the prefix, if any (it sorts first).
    pub(super) fn exact<T: Keyed>(self, list: &[T]) -> Option<usize> {
        let i = self.lo as usize;
        (i < self.hi as usize && list[i].key().len() == self.depth as usize).then_some(i)
    }
}
