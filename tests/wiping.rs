//! Keys wiped on drop (docs/SECURITY.md, "In memory"): no heap block the
//! process frees still holds a key.
//!
//! The global allocator here looks at every block as it is freed, while
//! it still belongs to the program (never after): with watching on, a
//! block that holds one of the test's keys (its 32 bytes, or their hex)
//! is counted. A reallocation is done as allocate, copy, look, free, so a
//! buffer that grows is looked at too. What it cannot see: the stack (the
//! copies Rust leaves when a key array is moved or passed by value), and
//! memory that is not Rust's: AWS-LC keeps the sealing keys in its own
//! `malloc`ed contexts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::Identity;
use ternio::protocol::frame::{Flags, Framing, Header};
use ternio::protocol::secure::{Initiator, Responder, StaticKeypair};
use ternio::protocol::system;
use ternio::protocol::{Decode, Encode, Packet};
use ternio_client::Client;
use ternio_tests::{Echo, RawConnection, test_server_builder};
use zeroize::Zeroizing;

/// The keys the test watches for: they appear nowhere else.
const IDENTITY_KEY: [u8; 32] = *b"\x8e\x13identity-key-of-wiping-test!!!";
const FILE_KEY: [u8; 32] = *b"\x91\x07a-key-saved-to-a-file-and-read";
const CLIENT_EPHEMERAL: [u8; 32] = *b"\xa4\x5cthe-client-ephemeral-of-test!!";
const SERVER_EPHEMERAL: [u8; 32] = *b"\xb7\x3fthe-server-ephemeral-of-test!!";
const CONTROL_KEY: [u8; 32] = *b"\xc2\x61a-key-the-test-frees-unwiped!!";

const KEYS: [[u8; 32]; 5] = [
    IDENTITY_KEY,
    FILE_KEY,
    CLIENT_EPHEMERAL,
    SERVER_EPHEMERAL,
    CONTROL_KEY,
];

/// Lower-case hex digits, for the keys' hex form.
const HEX: &[u8; 16] = b"0123456789abcdef";

struct Watching;

static WATCH: AtomicBool = AtomicBool::new(false);
/// Blocks freed while holding each key, raw or in hex, by index in `KEYS`.
static FOUND: [AtomicUsize; KEYS.len()] = [const { AtomicUsize::new(0) }; KEYS.len()];

/// Whether `block` holds `key`'s 32 bytes or its 64 hex digits.
fn holds(block: &[u8], key: &[u8; 32]) -> bool {
    let raw = block.windows(32).any(|window| window == key);
    let hex = block.windows(64).any(|window| {
        key.iter().enumerate().all(|(at, byte)| {
            window[2 * at] == HEX[usize::from(byte >> 4)]
                && window[2 * at + 1] == HEX[usize::from(byte & 0x0F)]
        })
    });
    raw || hex
}

/// Looks at a block about to be freed. Allocates nothing.
///
/// # Safety
///
/// `ptr` is valid for reads of `len` bytes, all initialized or not: only
/// compared, and a block being freed has been written or zeroed wherever a
/// key could be.
unsafe fn look(ptr: *const u8, len: usize) {
    if !WATCH.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: the caller's.
    let block = unsafe { std::slice::from_raw_parts(ptr, len) };
    for (key, found) in KEYS.iter().zip(&FOUND) {
        if holds(block, key) {
            found.fetch_add(1, Ordering::SeqCst);
        }
    }
}

// SAFETY: defers to the system allocator; looks at blocks only while they
// are still allocated.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the block is still ours until `System.dealloc`.
        unsafe {
            look(ptr, layout.size());
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Always a move: the old block is looked at, then freed.
        // SAFETY: `new_size` is valid for `layout.align()` (the caller's
        // contract); both blocks are ours while copied and looked at.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = System.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                look(ptr, layout.size());
                System.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[global_allocator]
static GLOBAL: Watching = Watching;

/// The watch is process-wide: one test watches at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `work` with the watch on; returns how many freed blocks held each key.
fn watched(work: impl FnOnce()) -> [usize; KEYS.len()] {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let before = FOUND.each_ref().map(|found| found.load(Ordering::SeqCst));
    WATCH.store(true, Ordering::SeqCst);
    work();
    WATCH.store(false, Ordering::SeqCst);
    let after = FOUND.each_ref().map(|found| found.load(Ordering::SeqCst));
    std::array::from_fn(|at| after[at] - before[at])
}

/// Index of `key` in `KEYS`.
fn index(key: &[u8; 32]) -> usize {
    KEYS.iter().position(|known| known == key).unwrap()
}

#[test]
fn the_watch_sees_a_key_freed_unwiped_and_not_one_freed_wiped() {
    let found = watched(|| {
        // Unwiped: in a box, and in a vector that grows (moved by realloc).
        drop(std::hint::black_box(Box::new(CONTROL_KEY)));
        let mut grown = Vec::with_capacity(32);
        grown.extend_from_slice(&CONTROL_KEY);
        grown.push(0);
        drop(std::hint::black_box(grown));
        // Wiped.
        drop(std::hint::black_box(Box::new(Zeroizing::new(CONTROL_KEY))));
    });
    // The box, the grown vector's old block, then the vector itself.
    assert_eq!(found[index(&CONTROL_KEY)], 3);
}

/// A server with an identity, NK handshakes and sealed traffic, shut down
/// and dropped: the identity key and every copy a handshake made of it
/// were wiped before their memory was freed.
#[test]
fn a_servers_identity_key_is_wiped_when_the_server_is_dropped() {
    let found = watched(|| {
        // Built outside the runtime: a key moved out of a local of an async
        // block leaves its bytes in the block's (heap) state, a copy of the
        // test's making.
        let identity = Identity::from_private_key(IDENTITY_KEY);
        let public = *identity.public_key();
        let server = test_server_builder()
            .identity(identity)
            .map_tcp("127.0.0.1:0")
            .build()
            .unwrap();
        let address = server.tcp_addrs()[0];
        let handle = server.handle();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let running = tokio::spawn(server.run());
            for _ in 0..3 {
                let client = Client::builder()
                    .tcp(address.to_string())
                    .pin(public)
                    .connect()
                    .await
                    .unwrap();
                let echo: Echo = client
                    .request_async(&Echo {
                        payload: Bytes::from_static(b"sealed"),
                    })
                    .await
                    .unwrap();
                assert_eq!(echo.payload, "sealed");
                client.close().await;
            }
            // A failed NK handshake (a wrong pin) too.
            let mut raw = RawConnection::connect(address).await;
            let body = Initiator::new(Some(&[9; 32]))
                .unwrap()
                .request_body()
                .unwrap();
            raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1), &body)
                .await;
            assert!(raw.recv().await.unwrap().header.flags.is_error());
            drop(raw);
            handle.shutdown();
            tokio::time::timeout(Duration::from_secs(20), running)
                .await
                .expect("the server stops")
                .unwrap()
                .unwrap();
        });
        drop(handle);
        drop(runtime);
    });
    assert_eq!(
        found[index(&IDENTITY_KEY)],
        0,
        "the identity key was freed unwiped"
    );
}

/// Both sides of an NK handshake with known ephemeral keys: once the
/// handshake is over and the sessions dropped, no freed block held the
/// ephemeral keys or the server's static key.
#[test]
fn handshake_keys_are_wiped() {
    let found = watched(|| {
        let identity = StaticKeypair::from_private(IDENTITY_KEY);
        let mut initiator =
            Initiator::with_ephemeral(Some(identity.public()), &CLIENT_EPHEMERAL).unwrap();
        let request = initiator.request_body().unwrap();
        let (reply, mut server) =
            Responder::respond_with(&request, Some(&identity), Some(&SERVER_EPHEMERAL)).unwrap();
        let mut client = initiator.finish(&reply).unwrap();
        // The session works: a frame each way.
        let mut out = BytesMut::new();
        let header = Header::new(Echo::OPCODE, Flags::NONE, 1);
        client
            .sealer
            .write_frame_with(&mut out, Framing::Message, header, usize::MAX, |out| {
                Echo {
                    payload: Bytes::from_static(b"x"),
                }
                .encode(out)
            })
            .unwrap();
        let frame = ternio::protocol::Frame::parse(out.freeze(), usize::MAX).unwrap();
        let mut body = BytesMut::from(&frame.body[..]);
        server.opener.open(&frame.header, &mut body).unwrap();
        assert_eq!(Echo::decode_body(&body.freeze()).unwrap().payload, "x");
        drop((client, server, identity));
    });
    let unwiped = [IDENTITY_KEY, CLIENT_EPHEMERAL, SERVER_EPHEMERAL].map(|key| found[index(&key)]);
    assert_eq!(
        unwiped,
        [0, 0, 0],
        "blocks freed unwiped holding the identity key, the client's and the server's ephemeral key"
    );
}

/// The buffers an identity file is written from and read into (hex and
/// PEM) are wiped, and so is the identity.
#[test]
fn identity_file_buffers_are_wiped() {
    let dir = std::env::temp_dir().join(format!("ternio-wiping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let found = watched(|| {
        let identity = Identity::from_private_key(FILE_KEY);
        identity.save(dir.join("key.hex")).unwrap();
        identity.save_pem(dir.join("key.pem")).unwrap();
        for name in ["key.hex", "key.pem"] {
            let loaded = Identity::load(dir.join(name)).unwrap();
            assert_eq!(loaded.public_key(), identity.public_key());
        }
        drop(identity);
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found[index(&FILE_KEY)], 0, "the key was freed unwiped");
}
