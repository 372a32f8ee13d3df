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

    /// The bytes each token id stands for, in id order (ids the tokenizer does not
    /// know give no bytes): an added token's text; for byte-level BPE (GPT-2, Qwen) the
    /// bytes its symbols encode; a byte-fallback `<0xNN>` token its byte; any other
    /// token the text it decodes to alone.
    pub fn token_bytes(&self) -> Vec<Vec<u8>> {
        let n = self.inner.get_vocab_size(true);
        let added = self.inner.get_added_tokens_decoder();
        let byte_level = matches!(
            self.inner.get_decoder(),
            Some(tokenizers::DecoderWrapper::ByteLevel(_))
        );
        let symbols = byte_level_symbols();
        (0..n as u32)
            .map(|id| {
                if let Some(t) = added.get(&id) {
                    return t.content.clone().into_bytes();
                }
                let Some(token) = self.inner.id_to_token(id) else {
                    return Vec::new();
                };
                if byte_level {
                    let bytes: Option<Vec<u8>> = token
                        .chars()
                        .map(|c| symbols.get(c as usize).copied().flatten())
                        .collect();
                    if let Some(bytes) = bytes {
                        return bytes;
                    }
                }
                if let Some(hex) = token.strip_prefix("<0x").and_then(|t| t.strip_suffix('>'))
                    && let Ok(b) = u8::from_str_radix(hex, 16)
                    && hex.len() == 2
                {
                    return vec![b];
                }
                self.decode(&[id])
                    .map(String::into_bytes)
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// The byte each symbol of the byte-level BPE alphabet (GPT-2's `bytes_to_unicode`)
/// stands for, indexed by the symbol's code point: printable Latin-1 bytes are their own
/// symbol, the other 68 bytes map in order to U+0100 and up.
fn byte_level_symbols() -> Vec<Option<u8>> {
    let mut table = vec![None; 512];
    let mut next = 256;
    for b in 0..=255u8 {
        let printable = matches!(b, 33..=126 | 161..=172 | 174..=255);
        let symbol = if printable {
            b as usize
        } else {
            next += 1;
            next - 1
        };
        table[symbol] = Some(b);
    }
    table
}
