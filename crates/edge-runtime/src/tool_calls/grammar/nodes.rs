//! The JSON schemas of array, object and union parameters, compiled into an arena of
//! nodes that [`super::json::Json`] follows while a value is written: item types,
//! declared property names (each once, the required ones all) and their types, enums.

use super::super::types::{JsonType, declared_types};
use super::lexers::JsonTop;
use serde_json::Value;

/// Index of a node in [`Nodes`].
pub(super) type NodeId = u16;

/// What a JSON value may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Node {
    /// Any JSON value.
    Any,
    /// A value of one of these types, its contents unconstrained.
    Types(JsonTop),
    /// One of these JSON texts (an `enum`), sorted.
    Enum(Vec<Vec<u8>>),
    /// An array whose items are all `items`.
    Array(NodeId),
    /// An object with these properties only (sorted by name); bit `i` of `required`
    /// set when `props[i]` is required (the first [`TRACKED_KEYS`] are tracked).
    Object {
        props: Vec<(Vec<u8>, NodeId)>,
        required: u32,
    },
}

/// Most properties of a nested object tracked for repeats and requirement.
pub(super) const TRACKED_KEYS: usize = 32;

/// The node every unknown schema gets.
pub(super) const ANY: NodeId = 0;

/// Nested schemas deeper than this are not followed (their values are [`Node::Any`]).
const MAX_SCHEMA_DEPTH: usize = 16;

/// The arena of compiled schema nodes of one grammar.
#[derive(Clone, Debug)]
pub(super) struct Nodes {
    nodes: Vec<Node>,
}

impl Default for Nodes {
    fn default() -> Self {
        Nodes {
            nodes: vec![Node::Any],
        }
    }
}

impl Nodes {
    pub(super) fn get(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    fn push(&mut self, node: Node) -> NodeId {
        if node == Node::Any || self.nodes.len() > NodeId::MAX as usize {
            return ANY;
        }
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// Compiles one schema (and what it nests) into the arena.
    pub(super) fn compile(&mut self, schema: &Value) -> NodeId {
        self.compile_at(schema, 0)
    }

    fn compile_at(&mut self, schema: &Value, depth: usize) -> NodeId {
        if depth > MAX_SCHEMA_DEPTH {
            return ANY;
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let mut texts: Vec<Vec<u8>> =
                values.iter().map(|v| v.to_string().into_bytes()).collect();
            texts.sort();
            texts.dedup();
            if !texts.is_empty() {
                return self.push(Node::Enum(texts));
            }
        }
        let Some(types) = declared_types(schema) else {
            return ANY;
        };
        match types.as_slice() {
            [JsonType::Array] => match schema.get("items") {
                Some(items) if items.is_object() => {
                    let items = self.compile_at(items, depth + 1);
                    self.push(Node::Array(items))
                }
                _ => self.push(Node::Types(JsonTop::ARRAY)),
            },
            [JsonType::Object] => self.object(schema, depth),
            _ => {
                let set = types
                    .iter()
                    .fold(JsonTop::NONE, |set, t| set.with(JsonTop::of(*t)));
                self.push(Node::Types(set))
            }
        }
    }

    /// An object schema: its declared properties, unless it declares none or allows
    /// others (`additionalProperties` other than `false`, when given), which makes it
    /// free-form.
    fn object(&mut self, schema: &Value, depth: usize) -> NodeId {
        let free = Node::Types(JsonTop::OBJECT);
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return self.push(free);
        };
        let extra = schema.get("additionalProperties");
        let open = extra.is_some_and(|v| v != &Value::Bool(false));
        // Names JSON would escape are not matched byte for byte; leave such objects free.
        let plain = |k: &str| !k.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        if open || props.is_empty() || !props.keys().all(|k| plain(k)) {
            return self.push(free);
        }
        let mut list: Vec<(Vec<u8>, NodeId)> = (props.iter())
            .map(|(k, v)| (k.as_bytes().to_vec(), self.compile_at(v, depth + 1)))
            .collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        let mut required = 0u32;
        for r in (schema.get("required").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if let Ok(i) = list.binary_search_by(|p| p.0.as_slice().cmp(r.as_bytes()))
                && i < TRACKED_KEYS
            {
                required |= 1 << i;
            }
        }
        self.push(Node::Object {
            props: list,
            required,
        })
    }
}
