//! Server-sent events of a streamed chat completion, read the way the MLPerf harness
//! reads them: every line `data: {json}` is one chunk (the JSON on one line); other
//! lines (comments, `event:`, blank separators) are skipped, `data: [DONE]` ends the
//! stream but is not required.

use super::ReplyBuilder;
use serde_json::Value;
use std::io::BufRead;

/// Why reading a stream stopped early.
#[derive(Debug)]
pub enum ReadError {
    /// The connection failed mid-stream.
    Io(std::io::Error),
    /// A chunk was not JSON, or the server sent an error event.
    Bad(String),
}

/// Feeds every chunk of `reader` to `builder`; returns the number of chunks read.
pub fn read_events(reader: impl BufRead, builder: &mut ReplyBuilder) -> Result<usize, ReadError> {
    let mut chunks = 0;
    for line in reader.lines() {
        let line = line.map_err(ReadError::Io)?;
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            break;
        }
        if !data.starts_with('{') {
            continue;
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ReadError::Bad(format!("an event is not JSON ({e}): {data}")))?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(ReadError::Bad(format!(
                "the server sent an error event: {msg} ({err})"
            )));
        }
        builder.chunk(&v);
        chunks += 1;
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn chunks_usage_and_done() {
        let text = concat!(
            ": keep-alive comment\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",",
            "\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,",
            "\"function\":{\"arguments\":\"\\\"ls\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after done\"}}]}\n\n",
        );
        let mut b = ReplyBuilder::new(Instant::now());
        assert_eq!(read_events(text.as_bytes(), &mut b).unwrap(), 5);
        let r = b.finish();
        assert_eq!(r.content, "Hi");
        assert_eq!(r.tool_calls[0].name, "bash");
        assert_eq!(r.tool_calls[0].arguments, r#"{"command":"ls"}"#);
        assert_eq!(r.usage.unwrap().completion_tokens, 4);
    }

    #[test]
    fn error_events_and_bad_json_are_errors() {
        let mut b = ReplyBuilder::new(Instant::now());
        let err = "data: {\"error\":{\"message\":\"too long\",\"type\":\"x\"}}\n\n";
        assert!(
            matches!(read_events(err.as_bytes(), &mut b), Err(ReadError::Bad(m)) if m.contains("too long"))
        );
        let bad = "data: {not json}\n\n";
        assert!(matches!(
            read_events(bad.as_bytes(), &mut b),
            Err(ReadError::Bad(_))
        ));
    }
}
