//! Access rules over HTTP: an API key, and the origins and host names a browser may
//! reach the server by.

use super::support::*;
use edge_runtime::server::AccessPolicy;
use serde_json::{Value, json};

/// GET `url` with `headers`: the status, the JSON body and the response headers.
async fn get_with(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = client.get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    let (status, h) = (res.status().as_u16(), res.headers().clone());
    (status, res.json().await.unwrap(), h)
}

/// An API key guards every route but /health; a browser from another origin, and a
/// `Host` that names neither this machine nor an allowed host (DNS rebinding), are
/// refused with OpenAI-style bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_origin_and_host() {
    let policy = AccessPolicy::default()
        .with_api_key("s3cret")
        .unwrap()
        .allow_host("tools.example");
    let base = start_with(|s| s.with_access(policy)).await;
    let client = reqwest::Client::new();
    let models = format!("{base}/v1/models");
    let key = ("authorization", "Bearer s3cret");

    let (status, v, _) = get_with(&client, &format!("{base}/health"), &[]).await;
    assert_eq!(status, 200, "{v}");
    let (status, v, h) = get_with(&client, &models, &[]).await;
    assert_error(status, &v, 401);
    assert_eq!(h["www-authenticate"], "Bearer");
    let (status, v, _) = get_with(&client, &models, &[("authorization", "Bearer nope")]).await;
    assert_error(status, &v, 401);
    let (status, v, _) = get_with(&client, &models, &[key]).await;
    assert_eq!(status, 200, "{v}");
    let res = client
        .post(format!("{base}/v1/chat/completions"))
        .header(key.0, key.1)
        .json(&json!({"messages": [user("hi")], "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);

    for (header, value, expected) in [
        ("origin", "https://evil.example", 403),
        ("origin", "null", 403),
        ("origin", "http://localhost:5173", 200),
        ("origin", "https://tools.example", 200),
        ("host", "rebound.example:8000", 403),
        ("host", "tools.example:8000", 200),
    ] {
        let (status, v, _) = get_with(&client, &models, &[key, (header, value)]).await;
        if expected == 200 {
            assert_eq!(status, 200, "{header}: {value}: {v}");
        } else {
            assert_error(status, &v, expected);
        }
    }
}
