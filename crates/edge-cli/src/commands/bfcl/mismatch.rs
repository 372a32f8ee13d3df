//! Why an answer is wrong: a typed reason per failure, for the report.

/// Why an answer is wrong, one per bfcl error type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    /// The number of calls differs from the expected number.
    #[error("wrong number of calls: expected {expected}, got {got}")]
    WrongCount {
        /// Expected calls.
        expected: usize,
        /// Calls made.
        got: usize,
    },
    /// The called function is not the expected one.
    #[error("expected a call to `{expected}`, got `{got}`")]
    WrongName {
        /// Expected name (underscored).
        expected: String,
        /// Name called.
        got: String,
    },
    /// The arguments were not a JSON object (and `{}` would not do either).
    #[error("call to `{function}` has malformed arguments: {arguments}")]
    MalformedArguments {
        /// The function called.
        function: String,
        /// The arguments as received.
        arguments: String,
    },
    /// A required parameter is missing.
    #[error("missing required parameter `{0}`")]
    MissingRequired(String),
    /// A parameter is in neither the schema nor the ground truth.
    #[error("unexpected parameter `{0}`")]
    UnexpectedParam(String),
    /// A value has the wrong type.
    #[error("parameter `{param}`: expected type {expected}, got {got}")]
    WrongType {
        /// The parameter.
        param: String,
        /// The schema's type.
        expected: String,
        /// Python's type of the value.
        got: &'static str,
    },
    /// A list's elements have the wrong type.
    #[error("parameter `{param}`: list elements are not {inner}")]
    NestedType {
        /// The parameter.
        param: String,
        /// Expected element type.
        inner: String,
    },
    /// A Java or JavaScript value was not given as a string.
    #[error("parameter `{param}`: {language} values must be strings, got {got}")]
    NotAString {
        /// The parameter.
        param: String,
        /// Java or JavaScript.
        language: &'static str,
        /// Python's type of the value.
        got: &'static str,
    },
    /// A value is not among the acceptable ones.
    #[error("parameter `{param}`: {value} is not an acceptable value")]
    WrongValue {
        /// The parameter.
        param: String,
        /// The value given (JSON).
        value: String,
    },
    /// A dict holds a key the answer does not.
    #[error("parameter `{param}`: unexpected dict key `{key}`")]
    UnexpectedDictKey {
        /// The parameter.
        param: String,
        /// The key.
        key: String,
    },
    /// A dict lacks a key the answer requires.
    #[error("parameter `{param}`: missing dict key `{key}`")]
    MissingDictKey {
        /// The parameter.
        param: String,
        /// The key.
        key: String,
    },
    /// A dict's value is not acceptable.
    #[error("parameter `{param}`: dict key `{key}` has an unacceptable value")]
    WrongDictValue {
        /// The parameter.
        param: String,
        /// The key.
        key: String,
    },
    /// A list of dicts has the wrong length.
    #[error("parameter `{param}`: wrong number of dicts in the list")]
    WrongDictCount {
        /// The parameter.
        param: String,
    },
    /// A dict was given where the answer only allows omission.
    #[error("parameter `{param}`: no acceptable dict")]
    NoAcceptableDict {
        /// The parameter.
        param: String,
    },
    /// A parameter that may not be omitted was left out.
    #[error("parameter `{0}` omitted but not optional")]
    MissingOptional(String),
    /// In a parallel category, no remaining call matches an expected one.
    #[error("no call matches expected call {index} (`{function}`); last tried: {last}")]
    NoMatch {
        /// Index of the expected call.
        index: usize,
        /// Its function.
        function: String,
        /// Why the last call tried failed.
        last: Box<Mismatch>,
    },
    /// A call was made where none should be (irrelevance).
    #[error("made {0} call(s) where none fits")]
    UnwantedCall(usize),
    /// No call was made where one fits (live_relevance).
    #[error("made no call where one fits")]
    NoCall,
    /// bfcl's Python checker would raise here (schema or answer it cannot handle).
    #[error("unsupported by the checker: {0}")]
    Unsupported(String),
    /// The answering backend failed on this entry.
    #[error("no answer: {0}")]
    NoAnswer(String),
}

impl Mismatch {
    /// A short kind for tables (bfcl's error-type family).
    pub fn kind(&self) -> &'static str {
        match self {
            Mismatch::WrongCount { .. } => "wrong_count",
            Mismatch::WrongName { .. } => "wrong_func_name",
            Mismatch::MalformedArguments { .. } => "malformed_arguments",
            Mismatch::MissingRequired(_) => "missing_required",
            Mismatch::UnexpectedParam(_) => "unexpected_param",
            Mismatch::WrongType { .. } => "type_error",
            Mismatch::NestedType { .. } => "type_error:nested",
            Mismatch::NotAString { .. } => "type_error:not_string",
            Mismatch::WrongValue { .. } => "value_error",
            Mismatch::UnexpectedDictKey { .. } | Mismatch::MissingDictKey { .. } => {
                "value_error:dict_key"
            }
            Mismatch::WrongDictValue { .. } => "value_error:dict_value",
            Mismatch::WrongDictCount { .. } => "value_error:list_dict_count",
            Mismatch::NoAcceptableDict { .. } => "dict_checker:unclear",
            Mismatch::MissingOptional(_) => "missing_optional",
            Mismatch::NoMatch { .. } => "cannot_find_match",
            Mismatch::UnwantedCall(_) => "irrelevance:made_call",
            Mismatch::NoCall => "relevance:no_call",
            Mismatch::Unsupported(_) => "unsupported",
            Mismatch::NoAnswer(_) => "no_answer",
        }
    }
}
