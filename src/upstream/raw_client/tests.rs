//! The raw client against a real HTTP/1.1 server: connections kept and used again, one the
//! server closed replaced, an answer's late end read at the next use, an answer given up
//! before its end closing its connection, and the sweep of idle connections.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::{body::Frame, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::{RawClient, UpstreamBody, host_of};

/// A server on 127.0.0.1 that counts the connections it accepted. `/json` answers JSON,
/// `/close` the same and closes its connection, `/stream` an event whose stream ends 50 ms
/// later, `/endless` an event and then nothing, `/flood` events without end.
async fn server() -> (Uri, Arc<AtomicUsize>) {
    let (uri, accepted, _) = server_counting_ends().await;
    (uri, accepted)
}

/// `server`, counting also the connections that ended.
async fn server_counting_ends() -> (Uri, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let (counted, ends) = (accepted.clone(), ended.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let ends = ends.clone();
            tokio::spawn(async move {
                let service = service_fn(|request: Request<hyper::body::Incoming>| async move {
                    Ok::<_, Infallible>(answer(request.uri().path()))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                ends.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (uri.parse().unwrap(), accepted, ended)
}

fn answer(path: &str) -> Response<BoxBody<Bytes, Infallible>> {
    let event = || Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"data: {}\n\n")));
    let body = match path {
        "/stream" => {
            let end = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Frame::data(Bytes::new()))
            });
            let events = futures::stream::iter([event()]).chain(end);
            BoxBody::new(StreamBody::new(events))
        }
        "/flood" => {
            let events = futures::stream::repeat_with(event);
            BoxBody::new(StreamBody::new(events))
        }
        "/endless" => {
            let events = futures::stream::iter([event()]).chain(futures::stream::pending());
            BoxBody::new(StreamBody::new(events))
        }
        _ => BoxBody::new(Full::new(Bytes::from_static(b"{\"ok\":true}"))),
    };
    let mut response = Response::new(body);
    if path == "/close" {
        response
            .headers_mut()
            .insert(http::header::CONNECTION, "close".parse().unwrap());
    }
    response
}

async fn get(client: &RawClient, uri: &Uri, path: &str) -> UpstreamBody {
    let uri = format!("http://{}{path}", uri.authority().unwrap());
    let request = Request::post(uri).body(Full::new(Bytes::new())).unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body()
}

async fn whole(body: UpstreamBody) -> Bytes {
    body.collect().await.unwrap().to_bytes()
}

fn client(uri: &Uri) -> RawClient {
    let client = RawClient::new(uri, Duration::from_secs(5)).unwrap();
    assert!(
        client.inline.is_some(),
        "a plain-HTTP upstream's connections are driven"
    );
    client
}

#[tokio::test]
async fn a_connection_serves_request_after_request() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    for _ in 0..5 {
        assert_eq!(
            whole(get(&client, &uri, "/json").await).await,
            "{\"ok\":true}"
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    whole(get(&client, &uri, "/close").await).await;
    // The closed connection is in the pool: the request goes on a new one.
    assert_eq!(
        whole(get(&client, &uri, "/json").await).await,
        "{\"ok\":true}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_late_end_of_a_released_answer_is_read_at_the_next_use() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    let mut body = get(&client, &uri, "/stream").await;
    let event = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(event, "data: {}\n\n");
    body.release(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        whole(get(&client, &uri, "/json").await).await,
        "{\"ok\":true}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_answer_whose_end_is_still_coming_leaves_its_connection_aside() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    let mut body = get(&client, &uri, "/endless").await;
    body.frame().await.unwrap().unwrap();
    body.release(Duration::from_secs(1));
    // Its end has not come: the next request opens a connection of its own.
    whole(get(&client, &uri, "/json").await).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_answer_that_floods_on_after_its_reader_is_done_has_its_connection_closed() {
    let (uri, accepted, ended) = server_counting_ends().await;
    let client = client(&uri);
    let mut body = get(&client, &uri, "/flood").await;
    body.frame().await.unwrap().unwrap();
    body.release(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Taken again, it still brings frame after frame: it is closed, not kept aside.
    assert_eq!(
        whole(get(&client, &uri, "/json").await).await,
        "{\"ok\":true}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    for _ in 0..100 {
        if ended.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the flooding connection was kept open");
}

#[tokio::test]
async fn an_answer_dropped_before_its_end_closes_its_connection() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    let mut body = get(&client, &uri, "/endless").await;
    body.frame().await.unwrap().unwrap();
    drop(body);
    whole(get(&client, &uri, "/json").await).await;
    whole(get(&client, &uri, "/json").await).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn concurrent_requests_each_get_a_connection_and_leave_it_for_the_next() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    let bodies = futures::future::join_all((0..4).map(|_| get(&client, &uri, "/stream"))).await;
    for body in bodies {
        assert_eq!(whole(body).await, "data: {}\n\n");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 4);
    for _ in 0..8 {
        whole(get(&client, &uri, "/json").await).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 4);
}

/// A server on 127.0.0.1 that answers JSON and closes a connection idle for 100 ms.
async fn server_closing_idle() -> (Uri, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = service_fn(|request: Request<hyper::body::Incoming>| async move {
                    Ok::<_, Infallible>(answer(request.uri().path()))
                });
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_millis(100))
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (uri.parse().unwrap(), accepted)
}

/// Waits up to 2 s for `client`'s pool to hold `idle` connections and have a sweep due or
/// not (`sweeping`).
async fn until_idle(client: &RawClient, idle: usize, sweeping: bool) {
    let pool = client.inline.as_ref().unwrap();
    for _ in 0..200 {
        if pool.idle_state() == (idle, sweeping) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("idle connections, sweep due: {:?}", pool.idle_state());
}

#[tokio::test]
async fn the_sweep_closes_idle_connections_the_upstream_closed_and_then_stops() {
    let (uri, accepted) = server_closing_idle().await;
    let client = client(&uri);
    whole(get(&client, &uri, "/json").await).await;
    let pool = client.inline.as_ref().unwrap();
    assert_eq!(pool.idle_state(), (1, true));
    // The server closes it after 100 ms; a sweep finds it closed, and none is due after.
    until_idle(&client, 0, false).await;
    assert_eq!(
        whole(get(&client, &uri, "/json").await).await,
        "{\"ok\":true}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(pool.idle_state(), (1, true), "the sweep is due again");
}

#[tokio::test]
async fn the_sweep_keeps_open_connections_and_closes_one_parked_past_its_wait() {
    let (uri, accepted) = server().await;
    let client = client(&uri);
    whole(get(&client, &uri, "/json").await).await;
    // Several sweeps go by: the connection stays, and serves the next request.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(client.inline.as_ref().unwrap().idle_state(), (1, true));
    whole(get(&client, &uri, "/json").await).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    // An answer still coming, parked for 100 ms: no request comes, and the sweep closes it.
    let mut body = get(&client, &uri, "/endless").await;
    body.frame().await.unwrap().unwrap();
    body.release(Duration::from_millis(100));
    assert_eq!(client.inline.as_ref().unwrap().idle_state(), (1, true));
    tokio::time::sleep(Duration::from_millis(300)).await;
    until_idle(&client, 0, false).await;
}

#[test]
fn an_https_upstream_goes_through_the_pooled_client() {
    let uri: Uri = "https://example.test/mcp".parse().unwrap();
    let client = RawClient::new(&uri, Duration::from_secs(5)).unwrap();
    assert!(client.inline.is_none());
}

#[test]
fn the_host_names_the_port_unless_it_is_the_schemes_own() {
    let host = |uri: &str| host_of(&uri.parse().unwrap()).unwrap();
    assert_eq!(host("http://127.0.0.1:8080/mcp"), "127.0.0.1:8080");
    assert_eq!(host("http://example.test/mcp"), "example.test");
    assert_eq!(host("http://example.test:80/mcp"), "example.test");
    assert_eq!(host("https://example.test:443/mcp"), "example.test");
    assert_eq!(host("https://example.test:80/mcp"), "example.test:80");
    assert_eq!(host("http://[::1]:9000/mcp"), "[::1]:9000");
}
