//! A JSON value read a byte at a time while following its schema ([`Nodes`]): the
//! syntax (RFC 8259), the types the schema allows, array items, an object's declared
//! keys (each once, the required ones all before `}`) and enums. `Copy` and about a
//! hundred bytes, so the token mask can try every vocabulary entry from a copy.

use super::lexers::{JsonTop, Number};
use super::nodes::{ANY, Node, NodeId, Nodes, TRACKED_KEYS};
use super::rules::Prefix;

/// Deepest nesting followed.
const MAX_DEPTH: usize = 8;

/// One open container.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Frame {
    /// Its schema ([`ANY`] when free-form).
    node: NodeId,
    /// Keys of a declared object already given (bit per tracked key).
    used: u32,
    object: bool,
}

/// The lexical position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lex {
    /// A value of the pending node must start.
    Value,
    /// Just after `[`: a value or `]`.
    ValueOrClose,
    /// Just after `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    Key,
    /// Inside a key of a free-form object (`escape` as in `Str`).
    FreeKey {
        escape: u8,
    },
    /// Inside a key of a declared object: the names it may still become.
    DeclaredKey(Prefix),
    /// Inside a string value. `escape`: 0 none, 1 after a backslash, 2..=5 the hex
    /// digits of a `\u` escape.
    Str {
        escape: u8,
    },
    /// After a key: `:`.
    Colon,
    Num {
        n: Number,
        integer: bool,
    },
    /// Inside `true` / `false` / `null` (index into [`WORDS`]), `pos` bytes matched.
    Word {
        which: u8,
        pos: u8,
    },
    /// Inside one of the pending node's enum texts.
    Lit(Prefix),
    /// After a value: `,`, the container's close, or (at the top) the end.
    After,
}

const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// A JSON value in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Json {
    frames: [Frame; MAX_DEPTH],
    depth: u8,
    lex: Lex,
    /// The schema of the value about to start (or being read, for numbers, words and
    /// enum texts).
    pending: NodeId,
}

/// What feeding one byte to a [`Json`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JsonStep {
    /// The byte belongs to the value.
    More(Json),
    /// The value was already whole and the byte is the `\n` that closes the parameter.
    End,
    /// The byte fits nowhere.
    Reject,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// A declared object's keys (name and schema), sorted by name.
type Keys = [(Vec<u8>, NodeId)];

/// The keys of a declared object, and which are required.
fn declared(nodes: &Nodes, node: NodeId) -> Option<(&Keys, u32)> {
    match nodes.get(node) {
        Node::Object { props, required } => Some((props, *required)),
        _ => None,
    }
}

fn enum_texts(nodes: &Nodes, node: NodeId) -> &[Vec<u8>] {
    match nodes.get(node) {
        Node::Enum(texts) => texts,
        _ => &[],
    }
}

fn is_used(used: u32, i: usize) -> bool {
    i < TRACKED_KEYS && used & (1 << i) != 0
}

impl Json {
    /// A value of schema `node`.
    pub(super) fn new(node: NodeId) -> Json {
        Json {
            frames: [Frame::default(); MAX_DEPTH],
            depth: 0,
            lex: Lex::Value,
            pending: node,
        }
    }

    fn with(self, lex: Lex) -> JsonStep {
        JsonStep::More(Json { lex, ..self })
    }

    fn top(&self) -> Option<&Frame> {
        self.depth.checked_sub(1).map(|d| &self.frames[d as usize])
    }

    /// The schema of the next item of the innermost array.
    fn items(&self, nodes: &Nodes) -> NodeId {
        match self.top().map(|f| nodes.get(f.node)) {
            Some(Node::Array(items)) => *items,
            _ => ANY,
        }
    }

    /// Whether the innermost declared object has a key left to give.
    fn key_left(&self, nodes: &Nodes) -> bool {
        let Some(f) = self.top() else { return false };
        match declared(nodes, f.node) {
            Some((props, _)) => (0..props.len()).any(|i| !is_used(f.used, i)),
            None => true,
        }
    }

    fn open(self, object: bool, nodes: &Nodes) -> JsonStep {
        let d = self.depth as usize;
        if d >= MAX_DEPTH {
            return JsonStep::Reject;
        }
        let mut j = self;
        j.frames[d] = Frame {
            node: self.pending,
            used: 0,
            object,
        };
        j.depth += 1;
        j.lex = if object {
            Lex::KeyOrClose
        } else {
            Lex::ValueOrClose
        };
        j.pending = j.items(nodes);
        JsonStep::More(j)
    }

    fn close(self, object: bool, nodes: &Nodes) -> JsonStep {
        let Some(f) = self.top().copied() else {
            return JsonStep::Reject;
        };
        if f.object != object {
            return JsonStep::Reject;
        }
        if let Some((_, required)) = declared(nodes, f.node)
            && f.used & required != required
        {
            return JsonStep::Reject;
        }
        let j = Json {
            depth: self.depth - 1,
            ..self
        };
        j.with(Lex::After)
    }

    /// The start of a value of the pending schema at `b`.
    fn start_value(self, b: u8, nodes: &Nodes) -> JsonStep {
        let types = match nodes.get(self.pending) {
            Node::Any => JsonTop::ANY,
            Node::Types(t) => *t,
            Node::Array(_) => JsonTop::ARRAY,
            Node::Object { .. } => JsonTop::OBJECT,
            Node::Enum(texts) => {
                return match Prefix::all(texts.len()).step(texts, b) {
                    Some(p) => self.with(Lex::Lit(p)),
                    None => JsonStep::Reject,
                };
            }
        };
        if !types.allows_start(b) {
            return JsonStep::Reject;
        }
        match b {
            b'{' => self.open(true, nodes),
            b'[' => self.open(false, nodes),
            b'"' => self.with(Lex::Str { escape: 0 }),
            b't' => self.with(Lex::Word { which: 0, pos: 1 }),
            b'f' => self.with(Lex::Word { which: 1, pos: 1 }),
            b'n' => self.with(Lex::Word { which: 2, pos: 1 }),
            _ => {
                let integer = types.integers_only();
                match Number::START.step(b, integer) {
                    Some(n) => self.with(Lex::Num { n, integer }),
                    None => JsonStep::Reject,
                }
            }
        }
    }

    /// Whether it is inside a string, not in an escape: bytes other than `"`, `\\` and
    /// control characters leave it as it is.
    pub(super) fn in_plain_string(&self) -> bool {
        matches!(
            self.lex,
            Lex::Str { escape: 0 } | Lex::FreeKey { escape: 0 }
        )
    }

    /// Whether the value is whole (nothing open, nothing half-read).
    fn whole(&self, nodes: &Nodes) -> bool {
        self.depth == 0
            && match self.lex {
                Lex::After => true,
                Lex::Num { n, .. } => n.complete(),
                Lex::Lit(p) => p.exact(enum_texts(nodes, self.pending)).is_some(),
                _ => false,
            }
    }

    /// Feeds one byte.
    pub(super) fn step(self, b: u8, nodes: &Nodes) -> JsonStep {
        if b == b'\n' && self.whole(nodes) {
            return JsonStep::End;
        }
        match self.lex {
            Lex::Value | Lex::ValueOrClose if is_space(b) && self.depth > 0 => self.with(self.lex),
            Lex::ValueOrClose if b == b']' => self.close(false, nodes),
            Lex::Value | Lex::ValueOrClose => self.start_value(b, nodes),
            Lex::KeyOrClose | Lex::Key if is_space(b) => self.with(self.lex),
            Lex::KeyOrClose if b == b'}' => self.close(true, nodes),
            Lex::KeyOrClose | Lex::Key if b == b'"' => self.key_start(nodes),
            Lex::KeyOrClose | Lex::Key => JsonStep::Reject,
            Lex::FreeKey { escape } => match string_byte(escape, b) {
                Some(Some(escape)) => self.with(Lex::FreeKey { escape }),
                Some(None) => Json {
                    pending: ANY,
                    ..self
                }
                .with(Lex::Colon),
                None => JsonStep::Reject,
            },
            Lex::DeclaredKey(p) => self.key_byte(p, b, nodes),
            Lex::Str { escape } => match string_byte(escape, b) {
                Some(Some(escape)) => self.with(Lex::Str { escape }),
                Some(None) => self.with(Lex::After),
                None => JsonStep::Reject,
            },
            Lex::Colon if is_space(b) => self.with(Lex::Colon),
            Lex::Colon if b == b':' => self.with(Lex::Value),
            Lex::Colon => JsonStep::Reject,
            Lex::Num { n, integer } => match n.step(b, integer) {
                Some(n) => self.with(Lex::Num { n, integer }),
                None if n.complete() => self.then(b, nodes),
                None => JsonStep::Reject,
            },
            Lex::Word { which, pos } => {
                let word = WORDS[which as usize];
                if word[pos as usize] != b {
                    return JsonStep::Reject;
                }
                match pos as usize + 1 == word.len() {
                    true => self.with(Lex::After),
                    false => self.with(Lex::Word {
                        which,
                        pos: pos + 1,
                    }),
                }
            }
            Lex::Lit(p) => {
                let texts = enum_texts(nodes, self.pending);
                match p.step(texts, b) {
                    Some(p) => self.with(Lex::Lit(p)),
                    None if p.exact(texts).is_some() => self.then(b, nodes),
                    None => JsonStep::Reject,
                }
            }
            Lex::After => self.after_value(b, nodes),
        }
    }

    /// A number or enum text ended at a byte that is not part of it: that byte follows
    /// the value.
    fn then(self, b: u8, nodes: &Nodes) -> JsonStep {
        match self.with(Lex::After) {
            JsonStep::More(j) => j.step(b, nodes),
            other => other,
        }
    }

    fn key_start(self, nodes: &Nodes) -> JsonStep {
        let Some(f) = self.top() else {
            return JsonStep::Reject;
        };
        match declared(nodes, f.node) {
            Some((props, _)) if self.key_left(nodes) => {
                self.with(Lex::DeclaredKey(Prefix::all(props.len())))
            }
            Some(_) => JsonStep::Reject,
            None => self.with(Lex::FreeKey { escape: 0 }),
        }
    }

    /// A byte of a declared key (or its closing quote).
    fn key_byte(self, p: Prefix, b: u8, nodes: &Nodes) -> JsonStep {
        let d = self.depth as usize - 1;
        let f = self.frames[d];
        let Some((props, _)) = declared(nodes, f.node) else {
            return JsonStep::Reject;
        };
        if b == b'"'
            && let Some(i) = p.exact(props)
            && !is_used(f.used, i)
        {
            let mut j = self;
            if i < TRACKED_KEYS {
                j.frames[d].used |= 1 << i;
            }
            j.pending = props[i].1;
            return j.with(Lex::Colon);
        }
        match p.step(props, b) {
            Some(next) if (next.lo..next.hi).any(|i| !is_used(f.used, i as usize)) => {
                self.with(Lex::DeclaredKey(next))
            }
            _ => JsonStep::Reject,
        }
    }

    fn after_value(self, b: u8, nodes: &Nodes) -> JsonStep {
        let Some(f) = self.top() else {
            return JsonStep::Reject; // only the closing `\n` (handled above) may follow
        };
        match b {
            _ if is_space(b) => self.with(Lex::After),
            b',' if f.object && self.key_left(nodes) => self.with(Lex::Key),
            b',' if f.object => JsonStep::Reject,
            b',' => Json {
                pending: self.items(nodes),
                ..self
            }
            .with(Lex::Value),
            b'}' => self.close(true, nodes),
            b']' => self.close(false, nodes),
            _ => JsonStep::Reject,
        }
    }
}

/// One byte inside a JSON string after `escape` (see [`Lex::Str`]): `Some(Some(e))`
/// continues with escape state `e`, `Some(None)` is the closing quote, `None` rejects.
fn string_byte(escape: u8, b: u8) -> Option<Option<u8>> {
    match escape {
        0 => match b {
            b'"' => Some(None),
            b'\\' => Some(Some(1)),
            // Control characters must be escaped inside JSON strings.
            0..=0x1f => None,
            _ => Some(Some(0)),
        },
        1 => match b {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(Some(0)),
            b'u' => Some(Some(2)),
            _ => None,
        },
        2..=5 if b.is_ascii_hexdigit() => Some(Some(if escape == 5 { 0 } else { escape + 1 })),
        _ => None,
    }
}
