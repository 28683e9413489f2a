//! The bench's wire meter (`tests/support/harness/meter.rs`): a relay that passes a client's
//! bytes both ways untouched and counts what the server sent, while the connection is open.

#[path = "support/harness/meter.rs"]
mod meter;

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn the_relay_passes_both_ways_and_counts_what_the_server_sent_as_it_passes() {
    // A server that answers each request line with 100,000 bytes, then waits for the next: a
    // watch's shape (the connection stays open between answers).
    let server = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut s, _) = server.accept().await.expect("accept");
        let mut line = [0u8; 4];
        while s.read_exact(&mut line).await.is_ok() {
            assert_eq!(&line, b"ask\n", "the client's bytes arrive untouched");
            s.write_all(&vec![7u8; 100_000]).await.expect("answer");
        }
    });
    let m = meter::Meter::start(addr.to_string());
    assert_eq!(m.sent(), 0);
    let port = m.url.rsplit(':').next().expect("port");
    let mut c = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .expect("connect to the relay");
    for round in 1..=3u64 {
        c.write_all(b"ask\n").await.expect("ask");
        let mut got = vec![0u8; 100_000];
        c.read_exact(&mut got)
            .await
            .expect("answer through the relay");
        assert!(got.iter().all(|b| *b == 7));
        // Counted while the connection stays open, not when it closes.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while m.sent() < round * 100_000 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(m.sent(), round * 100_000, "round {round}");
    }
    assert!(m.url.starts_with("https://127.0.0.1:"), "{}", m.url);
}
