//! The small pieces of typed values: JSON numbers read a byte at a time, and sets of
//! JSON types. Each state is `Copy` and a few bytes, so the token mask can try every
//! vocabulary entry from a copy.

use super::super::types::JsonType;

/// The parts of a JSON number (RFC 8259: `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NumAt {
    Start,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

/// Most digits before the exponent: an integer of 18 digits always fits an `i64`.
const MAX_DIGITS: u8 = 18;
/// Most exponent digits: with them every number stays inside an `f64`'s range.
const MAX_EXP_DIGITS: u8 = 2;

/// Where a JSON number stands. Its length is bounded so every accepted number reads
/// back as a JSON number of its type (an `i64` integer, a finite `f64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Number {
    at: NumAt,
    digits: u8,
    exp_digits: u8,
}

impl Number {
    /// Before the first byte.
    pub(super) const START: Number = Number {
        at: NumAt::Start,
        digits: 0,
        exp_digits: 0,
    };

    /// The state after `b`, or `None` when `b` cannot continue the number. With
    /// `integer` only `-?(0|[1-9]\d*)` is allowed.
    pub(super) fn step(self, b: u8, integer: bool) -> Option<Number> {
        use NumAt::*;
        let digit = b.is_ascii_digit();
        let at = match (self.at, b) {
            (Start, b'-') => Minus,
            (Start, b'0') => Zero,
            // `-0` reads back as the float −0.0, not an integer.
            (Minus, b'0') if !integer => Zero,
            (Start | Minus, b'1'..=b'9') => Int,
            (Int, _) if digit => Int,
            (Zero | Int, b'.') if !integer => Dot,
            (Zero | Int | Frac, b'e' | b'E') if !integer => Exp,
            (Dot | Frac, _) if digit => Frac,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, _) if digit => ExpDigits,
            _ => return None,
        };
        let mut n = Number { at, ..self };
        if digit && at == ExpDigits {
            n.exp_digits += 1;
        } else if digit {
            n.digits += 1;
        }
        (n.digits <= MAX_DIGITS && n.exp_digits <= MAX_EXP_DIGITS).then_some(n)
    }

    /// Whether the bytes so far are a whole number.
    pub(super) fn complete(self) -> bool {
        matches!(
            self.at,
            NumAt::Zero | NumAt::Int | NumAt::Frac | NumAt::ExpDigits
        )
    }
}

/// The JSON types a whole value may have, as a set (a union of non-string types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct JsonTop(u8);

impl JsonTop {
    pub(super) const ARRAY: JsonTop = JsonTop(1);
    pub(super) const OBJECT: JsonTop = JsonTop(2);
    pub(super) const INTEGER: JsonTop = JsonTop(4);
    /// Any number (integers included).
    pub(super) const NUMBER: JsonTop = JsonTop(8);
    pub(super) const BOOLEAN: JsonTop = JsonTop(16);
    pub(super) const NULL: JsonTop = JsonTop(32);
    /// Strings: only inside containers, or in a union (see `ValueRule`).
    pub(super) const STRING: JsonTop = JsonTop(64);
    pub(super) const NONE: JsonTop = JsonTop(0);
    pub(super) const ANY: JsonTop = JsonTop(127);

    pub(super) fn with(self, other: JsonTop) -> JsonTop {
        JsonTop(self.0 | other.0)
    }

    /// The set of one type.
    pub(super) fn of(t: JsonType) -> JsonTop {
        match t {
            JsonType::Array => Self::ARRAY,
            JsonType::Object => Self::OBJECT,
            JsonType::Integer => Self::INTEGER,
            JsonType::Number => Self::NUMBER,
            JsonType::Boolean => Self::BOOLEAN,
            JsonType::Null => Self::NULL,
            JsonType::String => Self::STRING,
        }
    }

    fn has(self, t: JsonTop) -> bool {
        self.0 & t.0 != 0
    }

    /// Whether a value starting with `b` may have one of the types.
    pub(super) fn allows_start(self, b: u8) -> bool {
        match b {
            b'[' => self.has(Self::ARRAY),
            b'{' => self.has(Self::OBJECT),
            b'"' => self.has(Self::STRING),
            b't' | b'f' => self.has(Self::BOOLEAN),
            b'n' => self.has(Self::NULL),
            _ => self.has(Self::NUMBER.with(Self::INTEGER)),
        }
    }

    /// Whether a top-level number must be an integer.
    pub(super) fn integers_only(self) -> bool {
        !self.has(Self::NUMBER)
    }
}
