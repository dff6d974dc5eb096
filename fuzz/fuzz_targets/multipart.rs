//! Multipart message bodies: `server::http::attachments::read_body`, the
//! reader behind `POST /channels/{c}/messages` and webhook executions, on a
//! real node (a server on a temporary data directory, started once), with
//! the fuzzer's bytes as the body of a `multipart/form-data` request.
//!
//! Checks: no panic; every refusal is a 4xx (bad form 400/50035, too large
//! 413/40005, busy 503 is not expected here: one request at a time), never
//! a 500; an accepted body yields at most `attachments.max_files` files.
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::IntoResponse;
use libfuzzer_sys::fuzz_target;
use protocol::{ChannelId, UserId};
use server::config::Config;
use server::http::attachments::{read_body, Sender};
use server::http::messages::MessageBody;

const BOUNDARY: &str = "fuzzboundary";

struct World {
    rt: tokio::runtime::Runtime,
    server: server::Server,
    _dir: std::path::PathBuf,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        // One directory, emptied at start: runs leave nothing behind but it.
        let dir = std::env::temp_dir().join("throng-fuzz-multipart");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Config { listen: "127.0.0.1:0".parse().unwrap(), data_dir: dir.clone(), ..Config::default() };
        // Small limits, so the size checks are reached by small inputs.
        c.attachments.max_file_bytes = 4 << 10;
        c.attachments.max_request_bytes = 16 << 10;
        c.attachments.max_files = 3;
        let server = rt.block_on(server::Server::start(c)).unwrap();
        World { rt, server, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let [mode, body @ ..] = data else { return };
    let w = world();
    let node = &w.server.node;
    let mut req = Request::builder()
        .method("POST")
        .uri("/api/v10/channels/1/messages")
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"));
    // Half the inputs declare their length, as clients do; a few lie.
    match mode % 4 {
        0 => req = req.header(header::CONTENT_LENGTH, body.len().to_string()),
        1 => req = req.header(header::CONTENT_LENGTH, (u64::from(*mode) << 20).to_string()),
        _ => {}
    }
    let req = req.body(Body::from(body.to_vec())).unwrap();
    let max_files = node.config.attachments.max_files;
    w.rt.block_on(async {
        // As a sender the route let through (the head was judged already).
        let sender = Sender { uploader: UserId(1), may_attach: true };
        match read_body::<MessageBody>(req, node, ChannelId(1), sender).await {
            Ok((_, uploads)) => {
                assert!(uploads.list.len() <= max_files, "{} files accepted", uploads.list.len());
                // Dropped without `keep`: the files are discarded.
            }
            Err(e) => {
                let status = e.into_response().status();
                assert!(status.is_client_error(), "refused with {status}");
                assert_ne!(status, StatusCode::NOT_FOUND);
            }
        }
    });
});
