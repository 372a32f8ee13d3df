//! Who may use the server: an optional API key, and the hosts a browser may reach it
//! from (the defence against cross-origin requests and DNS rebinding to a loopback
//! server). CORS stays off: no `Access-Control-*` header is ever sent.

use super::ServerState;
use super::errors::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The access rules of a server. The default has no API key and lets browsers in from
/// loopback origins only.
#[derive(Clone, Default)]
pub struct AccessPolicy {
    api_key: Option<String>,
    allowed_hosts: Vec<String>,
    /// Whether `Host` is checked: on a loopback listener (set by `serve_on`), where a
    /// rebound name is the only way in from a web page. A server exposed on a network
    /// is reached under whatever names that network gives it (a load balancer's
    /// service name, say), so there only `Origin` is checked.
    check_host: bool,
}

impl std::fmt::Debug for AccessPolicy {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessPolicy")
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("check_host", &self.check_host)
            .finish()
    }
}

impl AccessPolicy {
    /// Every route but the probes (`/health`, `/ready`) then needs `Authorization:
    /// Bearer <key>` (compared in constant time). An empty key (after trimming) is
    /// refused with `None`.
    pub fn with_api_key(mut self, key: &str) -> Option<Self> {
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        self.api_key = Some(key.to_string());
        Some(self)
    }

    /// Lets requests whose `Origin` or `Host` names `host` (a host name, no scheme or
    /// port; case-insensitive) in, beside loopback ones.
    pub fn allow_host(mut self, host: &str) -> Self {
        self.allowed_hosts.push(host.trim().to_ascii_lowercase());
        self
    }

    /// The same policy, checking `Host` or not (see the field).
    pub(super) fn checking_host(mut self, check: bool) -> Self {
        self.check_host = check;
        self
    }

    /// Whether a browser at `host` may use the server: loopback names and addresses
    /// always, others only when allowed.
    fn host_allowed(&self, host: &str) -> bool {
        is_loopback(host) || self.allowed_hosts.iter().any(|h| h == host)
    }

    /// Why `headers` may not reach this server, if they may not.
    fn refusal(&self, headers: &HeaderMap, path: &str) -> Option<ApiError> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let host = origin.to_str().ok().and_then(origin_host);
            if !host.is_some_and(|h| self.host_allowed(&h)) {
                return Some(forbidden(format!(
                    "requests from origin {origin:?} are not allowed (start the server with \
                     --allow-origin HOST to allow one)"
                )));
            }
        }
        // A name that is not ours in `Host` is what DNS rebinding looks like; an IP
        // address cannot be rebound, so addresses pass.
        if let Some(value) = headers.get(header::HOST).filter(|_| self.check_host) {
            let host = value.to_str().ok().map(host_of);
            let ok = host
                .is_some_and(|h| h.parse::<std::net::IpAddr>().is_ok() || self.host_allowed(&h));
            if !ok {
                return Some(forbidden(format!(
                    "the Host header {value:?} names no host this server answers for \
                     (start it with --allow-origin HOST to add one)"
                )));
            }
        }
        let key = self.api_key.as_deref()?;
        if PROBES.contains(&path) {
            return None;
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(g) if same_secret(g.trim().as_bytes(), key.as_bytes()) => None,
            Some(_) => Some(unauthorized("the API key is not valid")),
            None => Some(unauthorized(
                "this server needs an API key: send `Authorization: Bearer <key>`",
            )),
        }
    }
}

/// The routes a load balancer or orchestrator probes, open without the API key (they
/// say whether the server is up and takes work, nothing about requests).
const PROBES: &[&str] = &["/health", "/ready"];

fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, message)
}

/// Whether `host` (lowercase, no port) is this machine's loopback.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of a `Host` header value: lowercase, without the port, an IPv6 address
/// without its brackets.
fn host_of(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    value.split(':').next().unwrap_or_default().to_string()
}

/// The host of an `Origin` (`scheme://host[:port]`); `None` for `null` and other
/// opaque origins.
fn origin_host(origin: &str) -> Option<String> {
    let (_, rest) = origin.split_once("://")?;
    let host = host_of(rest.split('/').next()?);
    (!host.is_empty()).then_some(host)
}

/// Equality of two secrets whose time does not depend on where they first differ
/// (only on the length, which is not the secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The middleware: refuses requests the state's policy does not let in, before any
/// route runs.
pub(super) async fn guard(State(state): State<ServerState>, req: Request, next: Next) -> Response {
    match state.inner.access.refusal(req.headers(), req.uri().path()) {
        Some(err) => {
            let bearer = err.status == StatusCode::UNAUTHORIZED;
            let mut res = err.into_response();
            if bearer {
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            res
        }
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn hosts_and_origins() {
        assert_eq!(host_of("LocalHost:8000"), "localhost");
        assert_eq!(host_of("[::1]:8000"), "::1");
        assert_eq!(
            origin_host("http://127.0.0.1:3000"),
            Some("127.0.0.1".into())
        );
        assert_eq!(
            origin_host("https://app.example.com/x"),
            Some("app.example.com".into())
        );
        assert_eq!(origin_host("null"), None);
        let open = AccessPolicy::default().checking_host(true);
        let allowed = open.clone().allow_host("App.Example.com");
        for (h, open_ok, allowed_ok) in [
            (vec![("origin", "http://localhost:5173")], true, true),
            (vec![("origin", "http://[::1]:5173")], true, true),
            (vec![("origin", "https://evil.example")], false, false),
            (vec![("origin", "https://app.example.com")], false, true),
            (vec![("origin", "null")], false, false),
            (vec![("host", "127.0.0.1:8000")], true, true),
            (vec![("host", "192.168.1.20:8000")], true, true),
            (vec![("host", "rebound.example:8000")], false, false),
            (vec![("host", "app.example.com")], false, true),
            (vec![], true, true),
        ] {
            let h = headers(&h);
            assert_eq!(open.refusal(&h, "/v1/models").is_none(), open_ok, "{h:?}");
            assert_eq!(
                allowed.refusal(&h, "/v1/models").is_none(),
                allowed_ok,
                "{h:?}"
            );
        }
        // A network listener checks `Origin` only.
        let exposed = AccessPolicy::default();
        assert!(
            exposed
                .refusal(&headers(&[("host", "engine-0.svc:8000")]), "/")
                .is_none()
        );
        let evil = headers(&[("origin", "https://evil.example")]);
        assert!(exposed.refusal(&evil, "/").is_some());
    }

    #[test]
    fn api_keys() {
        assert!(AccessPolicy::default().with_api_key("  ").is_none());
        let p = AccessPolicy::default().with_api_key("s3cret\n").unwrap();
        assert!(!format!("{p:?}").contains("s3cret"));
        let status = |h: &[(&'static str, &str)], path| {
            p.refusal(&headers(h), path).map(|e| e.status.as_u16())
        };
        assert_eq!(status(&[], "/v1/models"), Some(401));
        assert_eq!(status(&[], "/health"), None);
        assert_eq!(status(&[], "/ready"), None);
        assert_eq!(status(&[], "/metrics"), Some(401));
        assert_eq!(
            status(&[("authorization", "Bearer s3cret")], "/v1/models"),
            None
        );
        assert_eq!(
            status(&[("authorization", "Bearer s3cre")], "/v1/models"),
            Some(401)
        );
        assert_eq!(
            status(&[("authorization", "Bearer S3cret")], "/v1/models"),
            Some(401)
        );
        assert_eq!(
            status(&[("authorization", "Basic s3cret")], "/v1/models"),
            Some(401)
        );
        assert!(same_secret(b"abc", b"abc") && !same_secret(b"abc", b"abd"));
    }
}
