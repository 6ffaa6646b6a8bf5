//! The datagram channel (docs/PROTOCOL.md section 4.4): ordinary frames in
//! UDP datagrams, beside a secure session's stream, for what would rather
//! be lost than late.
//!
//! A client with a secure session asks for a binding with
//! [`DATAGRAM_BIND`](crate::system::DATAGRAM_BIND); the answer
//! ([`DatagramBinding`](crate::system::DatagramBinding)) gives a random
//! 8-byte token, the server's UDP port and its largest datagram. Each
//! direction has its own key, derived from the session secret and the
//! token ([`DatagramKeys`]), never the stream's keys or counters. A
//! datagram is
//!
//! ```text
//! token    [u8; 8]   the binding: the server finds it without trying keys
//! counter  u64 LE    per direction, from 0
//! sealed   the frame (header + body), encrypted
//! tag      [u8; 16]
//! ```
//!
//! sealed with ChaCha20-Poly1305 under the direction's key, the nonce of
//! the counter (as for stream frames) and the token and counter as
//! associated data. A receiver drops (and never answers) a datagram whose
//! token it does not know, that does not authenticate, or whose counter its
//! [`ReplayWindow`] has seen or left behind.

use zeroize::Zeroizing;

use crate::aead;
use crate::frame::{Flags, HEADER_LEN, Header};
use crate::secure::{KEY_LEN, TAG_LEN, blake2s};

/// Bytes of a binding's token.
pub const TOKEN_LEN: usize = 8;
/// Bytes a datagram adds to the frame it carries: token, counter, tag.
pub const DATAGRAM_OVERHEAD: usize = TOKEN_LEN + 8 + TAG_LEN;
/// The largest datagram (the whole UDP payload) by default: fits the
/// 1,280-byte IPv6 minimum MTU with its headers.
pub const DEFAULT_MAX_DATAGRAM: usize = 1200;
/// Counters a [`ReplayWindow`] remembers below the highest it accepted.
pub const WINDOW: u64 = 2048;

/// What the client-to-server key hashes in front of the secret and token.
pub const CLIENT_LABEL: &[u8] = b"ternio/2 datagram c2s";
/// What the server-to-client key hashes in front of the secret and token.
pub const SERVER_LABEL: &[u8] = b"ternio/2 datagram s2c";

/// A binding's token.
pub type Token = [u8; TOKEN_LEN];

/// The two keys of a binding:
/// `BLAKE2s-256(label || session secret || token)`, one label per direction.
pub struct DatagramKeys {
    /// Seals what the client sends.
    pub client_to_server: Zeroizing<[u8; KEY_LEN]>,
    /// Seals what the server sends.
    pub server_to_client: Zeroizing<[u8; KEY_LEN]>,
}

/// Shows nothing of the keys.
impl std::fmt::Debug for DatagramKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatagramKeys").finish_non_exhaustive()
    }
}

impl DatagramKeys {
    /// The keys of the binding `token` of the session whose secret is
    /// `session_secret` ([`SecureChannel::session_secret`](crate::secure::SecureChannel::session_secret)).
    pub fn derive(session_secret: &[u8], token: &Token) -> Self {
        Self {
            client_to_server: blake2s(&[CLIENT_LABEL, session_secret, token]),
            server_to_client: blake2s(&[SERVER_LABEL, session_secret, token]),
        }
    }
}

/// Why a datagram was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// Sealed, it would be larger than the channel's largest datagram.
    #[error("a datagram of {size} bytes is above the largest, {max}")]
    TooLarge {
        /// Its size, sealed.
        size: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The frame is not a header and a body.
    #[error("not a frame")]
    NotAFrame,
    /// Every counter was used (2^64 - 1 datagrams): bind again.
    #[error("the binding's counters are used up")]
    Exhausted,
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Shorter than a token, a counter, a header and a tag.
    #[error("too short for a datagram")]
    TooShort,
    /// Another binding's token.
    #[error("another binding's token")]
    WrongToken,
    /// A counter seen already, or too far behind the highest.
    #[error("counter {0} replayed or too old")]
    Replayed(u64),
    /// The tag does not authenticate it: forged, corrupted, or another key.
    #[error("the tag does not authenticate the datagram")]
    BadTag,
}

/// A new random token.
pub fn generate_token() -> Token {
    let mut token = [0u8; TOKEN_LEN];
    aead::fill_random(&mut token);
    token
}

/// The token at the start of `datagram`, if it is long enough to hold one.
pub fn token_of(datagram: &[u8]) -> Option<Token> {
    datagram.get(..TOKEN_LEN)?.try_into().ok()
}

/// Seals one direction's datagrams.
pub struct DatagramSealer {
    cipher: aead::Key,
    token: Token,
    next: u64,
    max: usize,
}

impl std::fmt::Debug for DatagramSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatagramSealer")
            .field("next_counter", &self.next)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl DatagramSealer {
    /// A sealer with `key` for the binding `token`, whose datagrams are at
    /// most `max` bytes.
    pub fn new(key: &[u8; KEY_LEN], token: Token, max: usize) -> Self {
        Self {
            cipher: aead::Key::new(key),
            token,
            next: 0,
            max,
        }
    }

    /// The counter the next datagram gets.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// The largest frame (header + body) one datagram carries.
    pub fn max_frame(&self) -> usize {
        self.max.saturating_sub(DATAGRAM_OVERHEAD)
    }

    /// Writes the datagram of `frame` (an encoded frame: header + body, no
    /// length prefix) to `out`, which it clears first.
    pub fn seal(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), SealError> {
        if frame.len() < HEADER_LEN {
            return Err(SealError::NotAFrame);
        }
        let size = frame.len() + DATAGRAM_OVERHEAD;
        if size > self.max {
            return Err(SealError::TooLarge {
                size,
                max: self.max,
            });
        }
        // A sender never uses counter 2^64 - 1 (as on the stream).
        if self.next == u64::MAX {
            return Err(SealError::Exhausted);
        }
        let counter = self.next;
        out.clear();
        out.reserve(size);
        out.extend_from_slice(&self.token);
        out.extend_from_slice(&counter.to_le_bytes());
        out.extend_from_slice(frame);
        let (aad, plain) = out.split_at_mut(TOKEN_LEN + 8);
        let tag = self.cipher.seal(counter, aad, plain);
        out.extend_from_slice(&tag);
        self.next = counter + 1;
        Ok(())
    }
}

/// Opens one direction's datagrams, each counter once.
pub struct DatagramOpener {
    cipher: aead::Key,
    token: Token,
    window: ReplayWindow,
}

impl std::fmt::Debug for DatagramOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatagramOpener")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl DatagramOpener {
    /// An opener with `key` for the binding `token`.
    pub fn new(key: &[u8; KEY_LEN], token: Token) -> Self {
        Self {
            cipher: aead::Key::new(key),
            token,
            window: ReplayWindow::default(),
        }
    }

    /// Opens `datagram` in place: on success, the frame it carries (its
    /// header and body) is `datagram[TOKEN_LEN + 8..len - TAG_LEN]`,
    /// returned as that range's bounds. The counter is marked seen only once the tag
    /// verified, so a forged datagram changes nothing.
    pub fn open(&mut self, datagram: &mut [u8]) -> Result<std::ops::Range<usize>, OpenError> {
        self.open_ordered(datagram).map(|opened| opened.frame)
    }

    /// As [`open`](Self::open), and says whether the datagram's counter is
    /// above every counter accepted before ([`Opened::newest`]): a late
    /// datagram (one that another overtook, or an attacker held back and
    /// sends now) is accepted once, but is not the newest. A receiver that
    /// follows the sender's address takes it from the newest only.
    pub fn open_ordered(&mut self, datagram: &mut [u8]) -> Result<Opened, OpenError> {
        if datagram.len() < DATAGRAM_OVERHEAD + HEADER_LEN {
            return Err(OpenError::TooShort);
        }
        if datagram[..TOKEN_LEN] != self.token {
            return Err(OpenError::WrongToken);
        }
        let counter = u64::from_le_bytes(
            datagram[TOKEN_LEN..TOKEN_LEN + 8]
                .try_into()
                .expect("8 bytes"),
        );
        if counter == u64::MAX || !self.window.is_fresh(counter) {
            return Err(OpenError::Replayed(counter));
        }
        let (aad, sealed) = datagram.split_at_mut(TOKEN_LEN + 8);
        self.cipher
            .open(counter, aad, sealed)
            .map_err(|_| OpenError::BadTag)?;
        let newest = self.window.accept(counter);
        Ok(Opened {
            frame: TOKEN_LEN + 8..datagram.len() - TAG_LEN,
            counter,
            newest,
        })
    }

    /// The highest counter opened so far; `None` before the first.
    pub fn highest(&self) -> Option<u64> {
        self.window.top.checked_sub(1)
    }
}

/// A datagram [`DatagramOpener::open_ordered`] accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Where the frame (header and body) is in the datagram.
    pub frame: std::ops::Range<usize>,
    /// The datagram's counter.
    pub counter: u64,
    /// Whether the counter is above every counter accepted before it.
    pub newest: bool,
}

/// The counters a receiver has accepted: the highest, and which of the
/// [`WINDOW`] counters up to it (a bitmap, as in RFC 6479 and WireGuard):
/// the highest and the 2,047 below it. A counter above the highest is
/// fresh; one in the window is fresh once; one [`WINDOW`] (2,048) or more
/// below the highest is too old.
#[derive(Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    /// One more than the highest accepted; 0 before the first.
    top: u64,
    /// Bit `c % WINDOW` is set when counter `c` (within the window) was
    /// accepted.
    seen: [u64; (WINDOW / 64) as usize],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self {
            top: 0,
            seen: [0; (WINDOW / 64) as usize],
        }
    }
}

impl std::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("highest", &self.top.checked_sub(1))
            .finish_non_exhaustive()
    }
}

impl ReplayWindow {
    fn bit(counter: u64) -> (usize, u64) {
        let index = counter % WINDOW;
        ((index / 64) as usize, 1 << (index % 64))
    }

    /// Whether `counter` would be accepted: above the highest, or within
    /// the window (at most 2,047 below the highest) and not seen.
    pub fn is_fresh(&self, counter: u64) -> bool {
        if counter >= self.top {
            return true;
        }
        if self.top - counter > WINDOW {
            return false;
        }
        let (word, mask) = Self::bit(counter);
        self.seen[word] & mask == 0
    }

    /// Marks `counter` seen (call after [`is_fresh`](Self::is_fresh) and
    /// after authenticating it); returns whether it is the new highest
    /// (above every counter accepted before). Moving the top clears the
    /// bits of the counters that enter the window unseen.
    pub fn accept(&mut self, counter: u64) -> bool {
        let newest = counter >= self.top;
        if newest {
            let gap = counter - self.top;
            if gap >= WINDOW {
                self.seen = [0; (WINDOW / 64) as usize];
            } else {
                for skipped in self.top..counter {
                    let (word, mask) = Self::bit(skipped);
                    self.seen[word] &= !mask;
                }
            }
            self.top = counter + 1;
        }
        let (word, mask) = Self::bit(counter);
        self.seen[word] |= mask;
        newest
    }
}

/// Whether `header` may travel in a datagram: request id 0 and no flag
/// (nothing is answered over datagrams, and the datagram itself is sealed).
pub fn is_datagram_header(header: &Header) -> bool {
    header.request_id == 0 && header.flags == Flags::NONE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Header;

    fn frame(opcode: u16, body: &[u8]) -> Vec<u8> {
        let mut frame = Header::new(opcode, Flags::NONE, 0).to_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    fn pair() -> (DatagramSealer, DatagramOpener) {
        let keys = DatagramKeys::derive(&[9; 32], &[1, 2, 3, 4, 5, 6, 7, 8]);
        (
            DatagramSealer::new(&keys.client_to_server, [1, 2, 3, 4, 5, 6, 7, 8], 1200),
            DatagramOpener::new(&keys.client_to_server, [1, 2, 3, 4, 5, 6, 7, 8]),
        )
    }

    #[test]
    fn a_datagram_opens_once() {
        let (mut sealer, mut opener) = pair();
        let mut datagram = Vec::new();
        sealer
            .seal(&frame(0x0100, b"state"), &mut datagram)
            .unwrap();
        assert_eq!(datagram.len(), HEADER_LEN + 5 + DATAGRAM_OVERHEAD);
        let copy = datagram.clone();
        let range = opener.open(&mut datagram).unwrap();
        assert_eq!(&datagram[range], &frame(0x0100, b"state")[..]);
        let mut again = copy;
        assert_eq!(opener.open(&mut again), Err(OpenError::Replayed(0)));
    }

    #[test]
    fn highest_is_the_highest_counter_opened() {
        let (mut sealer, mut opener) = pair();
        assert_eq!(opener.highest(), None);
        let mut sealed = Vec::new();
        for _ in 0..3 {
            let mut datagram = Vec::new();
            sealer.seal(&frame(0x0100, b"s"), &mut datagram).unwrap();
            sealed.push(datagram);
        }
        let [zero, one, two] = &mut sealed[..] else {
            unreachable!()
        };
        opener.open(two).unwrap();
        assert_eq!(opener.highest(), Some(2));
        // A late one opens, and is not the highest.
        opener.open(zero).unwrap();
        assert_eq!(opener.highest(), Some(2));
        // A forged one changes nothing.
        let mut forged = one.clone();
        forged[20] ^= 1;
        assert!(opener.open(&mut forged).is_err());
        assert_eq!(opener.highest(), Some(2));
    }

    #[test]
    fn keys_differ_by_direction_secret_and_token() {
        let keys = DatagramKeys::derive(&[9; 32], &[1; 8]);
        assert_ne!(*keys.client_to_server, *keys.server_to_client);
        assert_ne!(
            *keys.client_to_server,
            *DatagramKeys::derive(&[8; 32], &[1; 8]).client_to_server
        );
        assert_ne!(
            *keys.client_to_server,
            *DatagramKeys::derive(&[9; 32], &[2; 8]).client_to_server
        );
    }

    #[test]
    fn every_changed_byte_is_refused_and_changes_nothing() {
        let (mut sealer, mut opener) = pair();
        let mut datagram = Vec::new();
        sealer
            .seal(&frame(0x0100, b"state"), &mut datagram)
            .unwrap();
        for index in 0..datagram.len() {
            let mut changed = datagram.clone();
            changed[index] ^= 0x40;
            let refused = opener.open(&mut changed);
            assert!(refused.is_err(), "byte {index}");
        }
        // The genuine one still opens: no forgery marked its counter.
        assert!(opener.open(&mut datagram).is_ok());
    }

    #[test]
    fn the_size_is_refused_at_send() {
        let (mut sealer, _) = pair();
        let mut out = Vec::new();
        let fits = vec![0; 1200 - DATAGRAM_OVERHEAD - HEADER_LEN];
        assert!(sealer.seal(&frame(1, &fits), &mut out).is_ok());
        assert_eq!(out.len(), 1200);
        let over = vec![0; fits.len() + 1];
        assert_eq!(
            sealer.seal(&frame(1, &over), &mut out),
            Err(SealError::TooLarge {
                size: 1201,
                max: 1200
            })
        );
        assert_eq!(sealer.seal(&[1, 2], &mut out), Err(SealError::NotAFrame));
    }

    #[test]
    fn the_window_takes_late_datagrams_once_and_refuses_old_ones() {
        let mut window = ReplayWindow::default();
        for counter in [0, 5, 3, 2047, 1] {
            assert!(window.is_fresh(counter), "{counter}");
            window.accept(counter);
            assert!(!window.is_fresh(counter), "{counter} twice");
        }
        assert!(window.is_fresh(4), "within the window, not seen");
        window.accept(3000);
        // 3000 - 2048 = 952: it and below are too old, above fresh unless seen.
        assert!(!window.is_fresh(951));
        assert!(!window.is_fresh(952));
        assert!(!window.is_fresh(5), "left behind");
        assert!(window.is_fresh(2000));
        assert!(!window.is_fresh(2047), "seen, still in the window");
        window.accept(1_000_000);
        assert!(!window.is_fresh(3000));
        assert!(window.is_fresh(999_999));
        // A bit reused after the window moved past it is clear.
        assert!(window.is_fresh(1_000_000 + WINDOW - 1));
        window.accept(1_000_000 + WINDOW - 1);
        assert!(window.is_fresh(1_000_000 + 1));
    }

    #[test]
    fn the_window_holds_the_highest_and_the_2047_below_it() {
        let highest = 10_000;
        let mut window = ReplayWindow::default();
        assert!(window.accept(highest));
        assert!(window.is_fresh(highest - (WINDOW - 1)), "2,047 below: kept");
        assert!(!window.is_fresh(highest - WINDOW), "2,048 below: too old");
        assert!(
            !window.accept(highest - (WINDOW - 1)),
            "accepted, not newest"
        );
        assert!(!window.is_fresh(highest - (WINDOW - 1)), "once");
        // One step up: the edge moves with the highest.
        assert!(window.is_fresh(highest + 1 - (WINDOW - 1)));
        assert!(window.accept(highest + 1));
        assert!(!window.is_fresh(highest + 1 - WINDOW));
        assert!(window.is_fresh(highest + 2 - WINDOW));
    }

    #[test]
    fn a_late_datagram_opens_but_is_not_the_newest() {
        let (mut sealer, mut opener) = pair();
        let mut late = Vec::new();
        sealer.seal(&frame(0x0100, b"late"), &mut late).unwrap();
        let mut newer = Vec::new();
        sealer.seal(&frame(0x0100, b"newer"), &mut newer).unwrap();
        let opened = opener.open_ordered(&mut newer).unwrap();
        assert_eq!((opened.counter, opened.newest), (1, true));
        let opened = opener.open_ordered(&mut late).unwrap();
        assert_eq!((opened.counter, opened.newest), (0, false));
    }

    #[test]
    fn only_one_way_plain_headers_travel() {
        assert!(is_datagram_header(&Header::new(1, Flags::NONE, 0)));
        assert!(!is_datagram_header(&Header::new(1, Flags::NONE, 3)));
        assert!(!is_datagram_header(&Header::new(1, Flags::RESPONSE, 0)));
    }
}
