//! The Hugging Face tokenizer of a model directory (`tokenizer.json`).

use crate::{Result, RuntimeError};
use std::path::Path;

/// A loaded tokenizer.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer(vocab {})", self.inner.get_vocab_size(true))
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json` from a file.
    pub fn from_file(path: &Path) -> Result<Self> {
        tokenizers::Tokenizer::from_file(path)
            .map(|inner| Tokenizer { inner })
            .map_err(|e| RuntimeError::Tokenizer(format!("cannot load {}: {e}", path.display())))
    }

    /// Loads from in-memory JSON.
    pub fn from_bytes(json: &[u8]) -> Result<Self> {
        tokenizers::Tokenizer::from_bytes(json)
            .map(|inner| Tokenizer { inner })
            .map_err(|e| RuntimeError::Tokenizer(format!("cannot parse tokenizer JSON: {e}")))
    }

    /// Encodes text (special-token strings in the text are recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.inner
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| RuntimeError::Tokenizer(format!("encoding failed: {e}")))
    }

    /// Encodes text and maps byte offsets in it (e.g. the message ends of
    /// [`crate::ChatTemplate::render_marked`]) to token positions: the offset where
    /// one token ends and the next begins becomes that token boundary; an offset inside
    /// a token (merged across it) is dropped.
    pub fn encode_marked(&self, text: &str, offsets: &[usize]) -> Result<(Vec<u32>, Vec<usize>)> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| RuntimeError::Tokenizer(format!("encoding failed: {e}")))?;
        let spans = enc.get_offsets();
        let marks = offsets
            .iter()
            .filter_map(|&at| {
                if at >= text.len() {
                    return Some(spans.len());
                }
                // The first token that ends past `at` must start at or after it.
                let next = spans.partition_point(|&(_, end)| end <= at);
                (next > 0 && spans.get(next).is_some_and(|&(start, _)| start >= at)).then_some(next)
            })
            .collect();
        Ok((enc.get_ids().to_vec(), marks))
    }

    /// Decodes ids to text, keeping special tokens visible.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| RuntimeError::Tokenizer(format!("decoding failed: {e}")))
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}
