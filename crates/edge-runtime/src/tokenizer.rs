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

    /// A streaming detokenizer over this tokenizer: feed it the ids of a reply one at a
    /// time and it returns each new piece of text once it is whole (a character split
    /// over several tokens comes out when its last byte arrives), keeping special
    /// tokens visible as [`Tokenizer::decode`] does. The pieces concatenate to the
    /// decode of all the ids. Built on `tokenizers`' own `DecodeStream`, so each step
    /// decodes a few tokens, not the whole reply.
    pub fn text_stream(&self) -> TextStream<'_> {
        TextStream {
            inner: self.inner.decode_stream(false),
        }
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

/// A reply's text, token by token ([`Tokenizer::text_stream`]).
pub struct TextStream<'a> {
    inner: tokenizers::DecodeStream<
        'a,
        tokenizers::ModelWrapper,
        tokenizers::NormalizerWrapper,
        tokenizers::PreTokenizerWrapper,
        tokenizers::PostProcessorWrapper,
        tokenizers::DecoderWrapper,
    >,
}

impl std::fmt::Debug for TextStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextStream")
    }
}

impl TextStream<'_> {
    /// Takes the next id: the text it completes, or `None` while a character is still
    /// incomplete.
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        self.inner
            .step(id)
            .map_err(|e| RuntimeError::Tokenizer(format!("decoding failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo model's byte-level tokenizer: one token a byte, so a non-ASCII character
    /// spans several tokens.
    fn demo() -> Tokenizer {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/tokenizer.json");
        Tokenizer::from_file(&path).unwrap()
    }

    #[test]
    fn the_text_stream_holds_split_characters_and_adds_up_to_the_decode() {
        let t = demo();
        let text = "naïve → 数据 <tool_call>\nok ✓";
        let ids = t.encode(text).unwrap();
        let mut stream = t.text_stream();
        let (mut joined, mut pieces) = (String::new(), 0);
        for &id in &ids {
            if let Some(piece) = stream.push(id).unwrap() {
                assert!(
                    !piece.contains('\u{fffd}'),
                    "a split character leaked: {piece:?}"
                );
                joined.push_str(&piece);
                pieces += 1;
            }
        }
        assert_eq!(joined, t.decode(&ids).unwrap());
        assert_eq!(joined, text);
        assert!(pieces < ids.len(), "multi-byte characters come out whole");
    }
}
