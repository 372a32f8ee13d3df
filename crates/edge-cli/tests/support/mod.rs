//! What the CLI's integration tests share.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `edge-llm serve --port 0` with `extra` flags; returns the child and the address it
/// printed (in a log free of colour codes, stdout being a pipe). Its further output is drained on a thread so it never blocks on a full
/// pipe.
pub fn spawn_serve(extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_edge-llm"))
        .args(["serve", "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server printed its address")
            .unwrap();
        // A pipe, not a terminal: the log is plain text.
        assert!(
            !line.contains('\x1b'),
            "colour codes in a piped log: {line:?}"
        );
        if let Some(at) = line.find("listening on http://") {
            let rest = &line[at + "listening on http://".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == ':'))
                .unwrap_or(rest.len());
            break rest[..end].to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}
