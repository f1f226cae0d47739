//! Schema-registry writes on a cluster follower, forwarded to the leader of
//! `__es_schemas` over the peer links (Confluent's followers forward too), so a
//! client may register against any node. The follower authenticates and
//! authorizes the request first; the leader runs it through its own router, which
//! authenticates it again from the same headers. A forwarded request carries
//! [`FORWARDED`] and is never forwarded again.
//!
//! Wire (peer RPC `FORWARD_HTTP`): request = `len u32` + JSON [`Head`] + body;
//! response = `len u32` + JSON [`Head`] (status, headers) + body.

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use super::AppState;
use crate::schemas::SCHEMAS_TOPIC;
use crate::service::Call;
use crate::service::error::BrokerError;

/// Marks a request a follower forwarded (its value: the follower's node id).
pub const FORWARDED: &str = "es-forwarded";
/// Set on a forwarded write's answer: the id of the leader that served it.
pub const SERVED_BY: &str = "es-registry-leader";
/// Request headers the leader needs to answer as the follower would.
const KEPT: [&str; 3] = ["content-type", "accept", "authorization"];

/// A forwarded request's or response's head.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Head {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub method: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    #[serde(default)]
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// Middleware on the registry's routes: a write that reaches a follower goes to
/// the leader; everything else is served here.
pub async fn registry_writes(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(cluster) = state.registry.cluster().cloned() else { return next.run(req).await };
    let uri = req.extensions().get::<OriginalUri>().map_or_else(|| req.uri().clone(), |o| o.0.clone());
    let method = req.method().as_str().to_ascii_lowercase();
    let write =
        super::routes::call_for(&method, uri.path()).is_some_and(|(call, _)| call == Call::SchemaWrite);
    if !write || cluster.leads_schemas() || req.headers().contains_key(FORWARDED) {
        return next.run(req).await;
    }
    let not_leader = |leader: Option<u64>| cluster.not_leader(SCHEMAS_TOPIC.to_owned(), 0, leader);
    let Some(leader) = cluster.schemas_leader() else { return not_leader(None).into_response() };
    let headers = KEPT
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), req.headers().get(*name)?.to_str().ok()?.to_owned())))
        .collect();
    let path = uri.path_and_query().map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let head = Head { method: req.method().as_str().to_owned(), uri: path, status: 0, headers };
    let limit = state.registry.options().request_bytes_max;
    let body = match axum::body::to_bytes(req.into_body(), limit).await {
        Ok(b) => b,
        Err(_) => return BrokerError::RequestTooLarge { max: limit }.into_response(),
    };
    match cluster.forward_http(leader, encode(&head, &body)).await {
        Ok(answer) => match decode(&answer) {
            Some(answer) => {
                let mut r = response(answer);
                r.headers_mut().insert(SERVED_BY, HeaderValue::from(leader));
                r
            }
            None => outcome_unknown(leader, "its answer did not decode").into_response(),
        },
        // Never sent: the caller may resend it anywhere (421 promises nothing was done).
        Err(
            e @ (es_peer::PeerError::Unavailable(_)
            | es_peer::PeerError::UnknownNode(_)
            | es_peer::PeerError::SelfCall),
        ) => {
            tracing::debug!(leader, error = %e, "forwarding a registry write failed");
            not_leader(Some(leader)).into_response()
        }
        Err(e) => {
            tracing::debug!(leader, error = %e, "forwarding a registry write failed");
            outcome_unknown(leader, &e.to_string()).into_response()
        }
    }
}

/// The leader's side: runs a forwarded request through `router`.
pub async fn serve(router: axum::Router, from: u64, payload: &[u8]) -> Result<Bytes, String> {
    use tower::ServiceExt;
    let (head, body) = decode(payload).ok_or("a malformed forwarded request")?;
    let mut req = axum::http::Request::builder().method(head.method.as_str()).uri(head.uri.as_str());
    for (name, value) in &head.headers {
        req = req.header(name.as_str(), value.as_str());
    }
    req = req.header(FORWARDED, from.to_string());
    let req = req.body(Body::from(body)).map_err(|e| format!("a forwarded request: {e}"))?;
    let answer = match router.oneshot(req).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    let status = answer.status().as_u16();
    let headers = answer
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let body = axum::body::to_bytes(answer.into_body(), crate::limits::FORWARDED_ANSWER_BYTES_MAX)
        .await
        .map_err(|e| format!("reading the answer: {e}"))?;
    Ok(encode(&Head { status, headers, ..Head::default() }, &body))
}

fn response((head, body): (Head, Bytes)) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (name, value) in head.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            r.headers_mut().append(n, v);
        }
    }
    r
}

fn encode(head: &Head, body: &[u8]) -> Bytes {
    let json = serde_json::to_vec(head).expect("plain struct");
    let mut out = BytesMut::with_capacity(4 + json.len() + body.len());
    out.put_u32(json.len() as u32);
    out.put_slice(&json);
    out.put_slice(body);
    out.freeze()
}

fn decode(payload: &[u8]) -> Option<(Head, Bytes)> {
    let len = u32::from_be_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let json = payload.get(4..4usize.checked_add(len)?)?;
    let head = serde_json::from_slice(json).ok()?;
    Some((head, Bytes::copy_from_slice(&payload[4 + len..])))
}

/// A forwarded write whose outcome is not known (sent, then no usable answer): not
/// a 421, since the leader may have done it.
fn outcome_unknown(leader: u64, why: &str) -> BrokerError {
    BrokerError::Timeout(format!(
        "node {leader}, the schema registry's leader, took this write but gave no usable answer ({why}): \
         it may or may not be done; read the subject before retrying"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_bodies_round_trip_and_truncations_are_refused() {
        let head =
            Head { method: "POST".into(), uri: "/registry/subjects/s/versions".into(), ..Head::default() };
        let wire = encode(&head, b"{\"schema\":\"\\\"int\\\"\"}");
        let (back, body) = decode(&wire).unwrap();
        assert_eq!((back.method.as_str(), back.uri.as_str()), ("POST", "/registry/subjects/s/versions"));
        assert_eq!(&body[..], b"{\"schema\":\"\\\"int\\\"\"}");
        for cut in 0..wire.len() - body.len() {
            assert!(decode(&wire[..cut]).is_none(), "cut at {cut}");
        }
    }
}
