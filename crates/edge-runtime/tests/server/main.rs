//! The OpenAI-compatible server over real HTTP: the router runs in-process on
//! `127.0.0.1:0` with the demo model of `models/demo`, and reqwest (or a raw socket,
//! for keep-alive) talks to it.
#![cfg(feature = "server")]

mod access;
mod admission;
mod cancel;
mod constrained;
mod device_errors;
#[cfg(feature = "cuda")]
mod device_memory;
mod lifecycle;
mod logprobs;
mod models;
mod readiness;
mod support;

use support::*;

use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_streamed_chat_with_keep_alive() {
    let base = start(16, 4, None).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"model": "demo", "messages": [user("Hello! Who are you?")],
                      "max_tokens": 24, "temperature": 0});
    let res = client
        .post(&url)
        .json(&body)
        .header("X-Session-ID", "s1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().contains_key("x-request-id"));
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "demo");
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(choice["message"]["content"].is_string());
    assert!(["stop", "length"].contains(&choice["finish_reason"].as_str().unwrap()));
    let u = &v["usage"];
    let (p, c) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
    );
    assert!(p > 0 && (1..=24).contains(&c));
    assert_eq!(u["total_tokens"].as_u64().unwrap(), p + c);
    assert!(u["prompt_tokens_details"]["cached_tokens"].is_u64());
    let plain = choice["message"]["content"].as_str().unwrap().to_string();

    // Streamed, several times over the same client: the text matches the plain reply.
    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    stream_body["stream_options"] = json!({"include_usage": true});
    for _ in 0..3 {
        let res = client.post(&url).json(&stream_body).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let (records, done) = sse_records(&res.text().await.unwrap());
        assert!(done, "ends with [DONE]");
        assert_eq!(records[0]["object"], "chat.completion.chunk");
        assert_eq!(records[0]["choices"][0]["delta"]["role"], "assistant");
        let text: String = records
            .iter()
            .filter_map(|r| r["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, plain);
        let finish = &records[records.len() - 2];
        assert!(finish["choices"][0]["finish_reason"].is_string());
        let usage = records.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], u["completion_tokens"]);
    }

    // Keep-alive on one raw connection: two streamed responses, each body complete.
    let mut sock = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    let payload = stream_body.to_string();
    for _ in 0..2 {
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{payload}",
            payload.len()
        );
        sock.write_all(req.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.ends_with(b"0\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(60), sock.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "the server closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("data: [DONE]"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_history_and_cached_tokens() {
    let base = start(16, 4, None).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let d = agent_defaults();
    let system = json!({"role": "system", "content": d["system"]});
    let ask = user("Show me the recent git history.");
    let body = json!({"messages": [system, ask], "tools": d["tools"],
                      "max_tokens": 200, "temperature": 0});
    let (status, v) = post(&client, &url, body.clone()).await;
    assert_eq!(status, 200, "{v}");
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "bash");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["command"].is_string(), "{args}");

    // The same, streamed: the call arrives as a tool_calls delta.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (records, done) = post_sse(&client, &url, &streamed).await;
    assert!(done);
    let delta_call = records
        .iter()
        .find_map(|r| r["choices"][0]["delta"]["tool_calls"].get(0))
        .expect("a tool_calls delta");
    assert_eq!(delta_call["function"]["name"], "bash");
    assert_eq!(delta_call["index"], 0);
    assert!(
        records
            .iter()
            .any(|r| r["choices"][0]["finish_reason"] == "tool_calls")
    );

    // The history with the call (arguments as a JSON string) and its result.
    let mut history = body["messages"].as_array().unwrap().clone();
    history.push(json!({"role": "assistant", "content": null,
               "reasoning_content": "The git log shows the history.", "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "bash", "arguments": call["function"]["arguments"]}}]}));
    history.push(json!({"role": "tool", "tool_call_id": "call_0",
                        "content": "a1b2c3 Fix the parser\nd4e5f6 Add the server"}));
    let (status, v) = post(
        &client,
        &url,
        json!({"messages": history, "tools": d["tools"],
                                                 "max_tokens": 30, "temperature": 0}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["choices"][0]["message"].is_object());
    // The conversation so far was cached: its earlier messages are reuse points.
    assert!(
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{v}"
    );

    // An extended plain conversation reports cached tokens too.
    let first = json!({"messages": [user("Hi there.")], "max_tokens": 16, "temperature": 0});
    let (_, v1) = post(&client, &url, first).await;
    let reply = v1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let longer = json!({"messages": [user("Hi there."), {"role": "assistant", "content": reply},
                                     user("Tell me more.")], "max_tokens": 16, "temperature": 0});
    let (status, v2) = post(&client, &url, longer).await;
    assert_eq!(status, 200);
    assert!(
        v2["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{v2}"
    );

    // tool_choice none renders no tools: a shorter prompt than auto's.
    let mut short = body.clone();
    short["max_tokens"] = json!(1);
    let (_, v_auto) = post(&client, &url, short.clone()).await;
    short["tool_choice"] = json!("none");
    let (status, v_none) = post(&client, &url, short).await;
    assert_eq!(status, 200, "{v_none}");
    let prompt_tokens = |v: &Value| v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        prompt_tokens(&v_none) < prompt_tokens(&v_auto),
        "{v_none} {v_auto}"
    );

    // Thinking: the reasoning comes back as reasoning_content, whole or streamed.
    let think = json!({"messages": [system.clone(), ask.clone()], "tools": d["tools"],
                       "max_tokens": 40, "temperature": 0,
                       "chat_template_kwargs": {"enable_thinking": true}});
    let (status, v_think) = post(&client, &url, think.clone()).await;
    assert_eq!(status, 200, "{v_think}");
    let reasoning = v_think["choices"][0]["message"]["reasoning_content"]
        .as_str()
        .expect("reasoning_content")
        .to_string();
    assert!(!reasoning.is_empty());
    let mut think_stream = think.clone();
    think_stream["stream"] = json!(true);
    let (records, done) = post_sse(&client, &url, &think_stream).await;
    assert!(done);
    let streamed: String = records
        .iter()
        .filter_map(|r| r["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    assert_eq!(streamed, reasoning);

    // Arguments that are not a JSON object are a bad request naming the call.
    let mut bad = history.clone();
    bad[2]["tool_calls"][0]["function"]["arguments"] = json!("not json");
    let (status, v) = post(&client, &url, json!({"messages": bad, "max_tokens": 4})).await;
    assert_error(status, &v, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_openai_style() {
    let base = start(16, 4, Some(64)).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let res = client
        .post(&url)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert_error(status, &res.json().await.unwrap(), 400);

    let ok = json!({"messages": [user("hi")], "max_tokens": 4});
    let cases = [
        json!({"messages": [{"role": "wizard", "content": "hi"}]}),
        json!({"messages": [user("hi"), {"role": "tool", "tool_call_id": "x", "content": "out"}]}),
        json!({"messages": []}),
        json!({"temperature": 2.5}),
        json!({"top_p": 0}),
        json!({"top_p": 1.5}),
        json!({"n": 2}),
        json!({"presence_penalty": 3}),
        json!({"frequency_penalty": -2.5}),
        json!({"min_p": 1.5}),
        json!({"repetition_penalty": 0}),
        json!({"max_tokens": 0}),
        json!({"max_completion_tokens": 0}),
        json!({"stop": 5}),
        json!({"tool_choice": {"type": "function", "function": {"name": "nope"}},
               "tools": agent_defaults()["tools"]}),
    ];
    for case in cases {
        let mut body = ok.clone();
        for (k, v) in case.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, v) = post(&client, &url, body.clone()).await;
        assert_error(status, &v, 400);
        println!("{body} -> {}", v["error"]["message"]);
    }

    // Requests a server would otherwise answer 200 while ignoring what they ask: each
    // a 400 whose `param` names the field at fault.
    let tool = |name: &str, param: &str| {
        json!([{"type": "function", "function": {"name": name, "parameters":
            {"type": "object", "properties": {param: {"type": "string"}}}}}])
    };
    let strict = [
        (json!({"max_tokens": 1_000_000_000}), "max_tokens"),
        (
            json!({"max_completion_tokens": 61}),
            "max_completion_tokens",
        ),
        (json!({"tool_choice": "required"}), "tool_choice"),
        (
            json!({"tool_choice": {"type": "function", "function": {"name": "bash"}}}),
            "tool_choice",
        ),
        (json!({"tools": tool("", "x")}), "tools"),
        (json!({"tools": tool("<b>", "x")}), "tools"),
        (json!({"tools": tool("f", "a>b")}), "tools"),
        (json!({"tools": tool("f", "")}), "tools"),
        (
            json!({"response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (json!({"best_of": 2}), "best_of"),
        (json!({"echo": true}), "echo"),
        (json!({"suffix": "x"}), "suffix"),
    ];
    for (case, param) in strict {
        let mut body = ok.clone();
        for (k, v) in case.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, v) = post(&client, &url, body.clone()).await;
        assert_error(status, &v, 400);
        assert_eq!(v["error"]["param"], param, "{body} -> {v}");
    }
    // Their neutral values are accepted (tool_choice `auto` needs no tools).
    let mut neutral = ok.clone();
    neutral["response_format"] = json!({"type": "text"});
    neutral["tool_choice"] = json!("auto");
    neutral["echo"] = json!(false);
    let (status, v) = post(&client, &url, neutral).await;
    assert_eq!(status, 200, "{v}");

    // Text completions name their own field, and take token ids as the prompt.
    let completions = format!("{base}/v1/completions");
    let (status, v) = post(
        &client,
        &completions,
        json!({"prompt": "word ".repeat(200)}),
    )
    .await;
    assert_error(status, &v, 400);
    assert_eq!(v["error"]["param"], "prompt", "{v}");
    for bad in [json!([[1, 2], [3]]), json!([1, -2]), json!(5), json!([])] {
        let (status, v) = post(&client, &completions, json!({"prompt": bad})).await;
        assert_error(status, &v, 400);
        assert_eq!(v["error"]["param"], "prompt", "{v}");
    }
    let ids = json!({"prompt": [10, 11, 12], "max_tokens": 2, "temperature": 0});
    let (status, v) = post(&client, &completions, ids).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], 3, "{v}");

    // A known route with the wrong method: 405 with a body.
    let res = client.get(&url).send().await.unwrap();
    let status = res.status().as_u16();
    assert_error(status, &res.json().await.unwrap(), 405);

    // Past the context window (64 tokens here): the message gives both numbers.
    let long = "word ".repeat(200);
    let (status, v) = post(&client, &url, json!({"messages": [user(&long)]})).await;
    assert_error(status, &v, 400);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("64"), "{msg}");

    // Too large a body.
    let huge = "x".repeat(9 << 20);
    let res = client
        .post(&url)
        .json(&json!({"messages": [user(&huge)]}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert_eq!(
        res.headers()["connection"],
        "close",
        "the unread body ends the connection"
    );
    assert_error(status, &res.json().await.unwrap(), 413);

    // Unknown route.
    let res = client
        .get(format!("{base}/v1/nothing"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert_error(status, &res.json().await.unwrap(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_models_health_metrics() {
    let base = start(16, 4, None).await;
    let client = reqwest::Client::new();
    let (status, v) = post(
        &client,
        &format!("{base}/v1/completions"),
        json!({"prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "text_completion");
    let text = v["choices"][0]["text"].as_str().unwrap().to_string();
    let res = client
        .post(format!("{base}/v1/completions"))
        .json(&json!({"prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0, "stream": true}))
        .send()
        .await
        .unwrap();
    let (records, done) = sse_records(&res.text().await.unwrap());
    assert!(done);
    let streamed: String = records
        .iter()
        .filter_map(|r| r["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, text);

    // A stop string cuts the text before its first occurrence, streamed or not.
    let chars: Vec<char> = text.chars().collect();
    assert!(chars.len() >= 4, "{text:?}");
    let cut: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let expected = &text[..text.find(&cut).unwrap()];
    let mut body = json!({"prompt": "The quick brown fox", "max_tokens": 12,
                          "temperature": 0, "stop": [cut.clone(), "\u{1}never"]});
    let (_, v) = post(&client, &format!("{base}/v1/completions"), body.clone()).await;
    assert_eq!(v["choices"][0]["text"].as_str().unwrap(), expected);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    body["stream"] = json!(true);
    let res = client
        .post(format!("{base}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let (records, done) = sse_records(&res.text().await.unwrap());
    assert!(done);
    let streamed: String = records
        .iter()
        .filter_map(|r| r["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, expected);
    assert!(
        records
            .iter()
            .any(|r| r["choices"][0]["finish_reason"] == "stop")
    );
    eprintln!("completion {text:?}, cut at {cut:?}");

    let v: Value = client
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"][0]["id"], "demo");
    let v: Value = client
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "ok");
    let m = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "edge_requests_total{code=\"200\"}",
        "edge_time_to_first_token_seconds_bucket",
        "edge_inter_token_latency_seconds_count",
        "edge_generated_tokens_total",
        "edge_cached_tokens_total",
        "edge_in_flight",
    ] {
        assert!(m.contains(name), "{name} missing from\n{m}");
    }
}

async fn wait_idle(client: &reqwest::Client, base: &str) -> Value {
    for _ in 0..200 {
        let v: Value = client
            .get(format!("{base}/health"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["in_flight"] == 0 && v["sequences"] == 0 {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the engine did not become idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_and_disconnects() {
    let base = start(4, 4, None).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let requests = (0..32).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let body = json!({"messages": [user(&format!("Question number {i}?"))],
                              "max_tokens": 8, "temperature": 0.7, "seed": i,
                              "stream": i % 2 == 0});
            let res = client.post(&url).json(&body).send().await.unwrap();
            let status = res.status().as_u16();
            let text = res.text().await.unwrap();
            (i, status, text)
        }
    });
    let results = futures_util::future::join_all(requests).await;
    let (mut ok, mut refused) = (0, 0);
    for (i, status, text) in results {
        match status {
            200 if i % 2 == 0 => {
                let (records, done) = sse_records(&text);
                assert!(
                    done && records
                        .iter()
                        .any(|r| r["choices"][0]["finish_reason"].is_string())
                );
                ok += 1;
            }
            200 => {
                let v: Value = serde_json::from_str(&text).unwrap();
                assert!(v["choices"][0]["message"]["content"].is_string());
                ok += 1;
            }
            429 => {
                assert_error(429, &serde_json::from_str(&text).unwrap(), 429);
                refused += 1;
            }
            other => panic!("request {i}: status {other}: {text}"),
        }
    }
    eprintln!("{ok} answered, {refused} refused");
    assert!(ok >= 4, "{ok} answered, {refused} refused");
    let v = wait_idle(&client, &base).await;
    assert_eq!(v["refcounts_ok"], true);

    // A client that goes away mid-stream cancels its request: the engine stops
    // generating for it long before its 2000 tokens.
    let generated = |m: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix("edge_generated_tokens_total "))
            .and_then(|n| n.parse().ok())
            .expect("edge_generated_tokens_total")
    };
    let metrics_url = format!("{base}/metrics");
    let before = generated(
        &client
            .get(&metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    let res = client
        .post(format!("{base}/v1/completions"))
        // Greedy, the demo model continues this for all 2000 tokens when let run.
        .json(&json!({"prompt": "1, 2, 3, 4, 5, 6,", "max_tokens": 2000,
                      "temperature": 0, "stream": true}))
        .send()
        .await
        .unwrap();
    let mut body = res.bytes_stream();
    let _ = body.next().await;
    drop(body);
    let v = wait_idle(&client, &base).await;
    assert_eq!(v["refcounts_ok"], true);
    let after = generated(
        &client
            .get(&metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    eprintln!("the cancelled request generated {} tokens", after - before);
    assert!(after - before < 1000, "{before} -> {after}");
}
