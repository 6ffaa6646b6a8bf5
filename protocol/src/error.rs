//! Error codes (section 2), disconnect reasons (section 4) and the errors of
//! decoding frames and fields.

use std::fmt;

/// The code carried by an error response (`RESPONSE | ERROR`), section 2.
///
/// Codes 1 to 10 are the contract's own; 100 and above belong to the
/// application. Codes 0 and 11 to 99 are not assigned: a receiver keeps them
/// as [`ErrorCode::Unassigned`] instead of failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 1: no handler for the opcode.
    UnknownOpcode,
    /// 2: the body does not decode as the handler's packet type.
    Malformed,
    /// 3: the connection lacks the handler's required permission.
    Unauthorized,
    /// 4: over the handler's rate limit for this connection.
    RateLimited,
    /// 5: the handler ran past its time limit.
    Timeout,
    /// 6: the handler requires an encrypted request, and this one was not.
    EncryptionRequired,
    /// 7: the handler failed or panicked; the connection stays up.
    Internal,
    /// 8: the server sheds load.
    Overloaded,
    /// 9: handshake rejected.
    HandshakeFailed,
    /// 10: authentication tag or nonce check failed.
    DecryptFailed,
    /// 100 and above: an error the application defines.
    Application(AppCode),
    /// 0 or 11 to 99: not assigned by the contract.
    Unassigned(u16),
}

impl ErrorCode {
    /// The first code that belongs to applications.
    pub const FIRST_APPLICATION: u16 = 100;

    /// The code as it goes on the wire.
    pub const fn to_u16(self) -> u16 {
        match self {
            Self::UnknownOpcode => 1,
            Self::Malformed => 2,
            Self::Unauthorized => 3,
            Self::RateLimited => 4,
            Self::Timeout => 5,
            Self::EncryptionRequired => 6,
            Self::Internal => 7,
            Self::Overloaded => 8,
            Self::HandshakeFailed => 9,
            Self::DecryptFailed => 10,
            Self::Application(code) => code.get(),
            Self::Unassigned(code) => code,
        }
    }

    /// The code read from the wire.
    pub const fn from_u16(code: u16) -> Self {
        match code {
            1 => Self::UnknownOpcode,
            2 => Self::Malformed,
            3 => Self::Unauthorized,
            4 => Self::RateLimited,
            5 => Self::Timeout,
            6 => Self::EncryptionRequired,
            7 => Self::Internal,
            8 => Self::Overloaded,
            9 => Self::HandshakeFailed,
            10 => Self::DecryptFailed,
            c if c >= Self::FIRST_APPLICATION => Self::Application(AppCode(c)),
            c => Self::Unassigned(c),
        }
    }

    /// The contract's name for the code, such as `UNKNOWN_OPCODE`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::UnknownOpcode => "UNKNOWN_OPCODE",
            Self::Malformed => "MALFORMED",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::RateLimited => "RATE_LIMITED",
            Self::Timeout => "TIMEOUT",
            Self::EncryptionRequired => "ENCRYPTION_REQUIRED",
            Self::Internal => "INTERNAL",
            Self::Overloaded => "OVERLOADED",
            Self::HandshakeFailed => "HANDSHAKE_FAILED",
            Self::DecryptFailed => "DECRYPT_FAILED",
            Self::Application(_) => "APPLICATION",
            Self::Unassigned(_) => "UNASSIGNED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.to_u16())
    }
}

/// An error code of the application's own: 100 and above, the range the
/// contract leaves to applications. Declared once, as a constant, and the
/// range is checked when the constant is compiled:
///
/// ```
/// use ternio_protocol::{AppCode, ErrorCode};
///
/// const ROOM_FULL: AppCode = AppCode::new(100);
/// assert_eq!(ErrorCode::from(ROOM_FULL), ErrorCode::from_u16(100));
/// ```
///
/// ```compile_fail
/// // Below 100: the constant does not compile.
/// const NOT_MINE: ternio_protocol::AppCode = ternio_protocol::AppCode::new(7);
/// # let _ = NOT_MINE;
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppCode(u16);

/// The number alone: `Application(120)` in an [`ErrorCode`]'s `Debug`.
impl fmt::Debug for AppCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AppCode {
    /// `code`, which must be 100 or above: a panic otherwise, which in a
    /// `const` is a compile error.
    pub const fn new(code: u16) -> Self {
        assert!(
            code >= ErrorCode::FIRST_APPLICATION,
            "application error codes are 100 and above"
        );
        Self(code)
    }

    /// `code` if it is 100 or above.
    pub const fn try_new(code: u16) -> Option<Self> {
        if code >= ErrorCode::FIRST_APPLICATION {
            Some(Self(code))
        } else {
            None
        }
    }

    /// The code as it goes on the wire.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl From<AppCode> for ErrorCode {
    fn from(code: AppCode) -> Self {
        Self::Application(code)
    }
}

impl PartialEq<AppCode> for ErrorCode {
    fn eq(&self, other: &AppCode) -> bool {
        *self == Self::Application(*other)
    }
}

impl fmt::Display for AppCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a peer closes a connection on purpose: the `reason` of a `DISCONNECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisconnectReason {
    /// 1: an ordinary close.
    Normal,
    /// 2: the server is shutting down.
    Shutdown,
    /// 3: the peer sent a malformed frame.
    Malformed,
    /// 4: the peer announced a frame above the maximum size.
    FrameTooLarge,
    /// 5: the connection was idle too long.
    IdleTimeout,
    /// 6: the handshake did not complete in time.
    HandshakeTimeout,
    /// 7: a sealed frame failed to open.
    DecryptFailed,
    /// 8: the server refuses more connections.
    TooManyConnections,
    /// 9: the peer does not read fast enough.
    SlowConsumer,
    /// 10: the application removed the connection.
    Kicked,
    /// Any other value, kept as received.
    Other(u16),
}

impl DisconnectReason {
    /// The reason as it goes on the wire.
    pub const fn to_u16(self) -> u16 {
        match self {
            Self::Normal => 1,
            Self::Shutdown => 2,
            Self::Malformed => 3,
            Self::FrameTooLarge => 4,
            Self::IdleTimeout => 5,
            Self::HandshakeTimeout => 6,
            Self::DecryptFailed => 7,
            Self::TooManyConnections => 8,
            Self::SlowConsumer => 9,
            Self::Kicked => 10,
            Self::Other(code) => code,
        }
    }

    /// The reason read from the wire.
    pub const fn from_u16(code: u16) -> Self {
        match code {
            1 => Self::Normal,
            2 => Self::Shutdown,
            3 => Self::Malformed,
            4 => Self::FrameTooLarge,
            5 => Self::IdleTimeout,
            6 => Self::HandshakeTimeout,
            7 => Self::DecryptFailed,
            8 => Self::TooManyConnections,
            9 => Self::SlowConsumer,
            10 => Self::Kicked,
            c => Self::Other(c),
        }
    }

    /// The contract's name for the reason, such as `FRAME_TOO_LARGE`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Shutdown => "SHUTDOWN",
            Self::Malformed => "MALFORMED",
            Self::FrameTooLarge => "FRAME_TOO_LARGE",
            Self::IdleTimeout => "IDLE_TIMEOUT",
            Self::HandshakeTimeout => "HANDSHAKE_TIMEOUT",
            Self::DecryptFailed => "DECRYPT_FAILED",
            Self::TooManyConnections => "TOO_MANY_CONNECTIONS",
            Self::SlowConsumer => "SLOW_CONSUMER",
            Self::Kicked => "KICKED",
            Self::Other(_) => "OTHER",
        }
    }
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.to_u16())
    }
}

/// A frame that breaks section 1: the connection that sent it is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A length prefix or message shorter than the 7-byte header.
    #[error("frame of {0} bytes is shorter than the 7-byte header")]
    TooShort(usize),
    /// A frame larger than the receiver's maximum.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The announced or actual size of the frame.
        len: usize,
        /// The receiver's maximum frame size.
        max: usize,
    },
    /// A frame with one of the reserved flag bits (3 to 7) set.
    #[error("reserved flag bits set: {0:#04x}")]
    ReservedFlags(u8),
    /// A secure session sealed its last allowed frame (counter 2^64 - 2):
    /// it must close rather than seal another (section 5.1).
    #[error("the secure session's counter is exhausted")]
    CounterExhausted,
}

impl FrameError {
    /// The `DISCONNECT` reason a receiver sends for this error.
    pub const fn disconnect_reason(&self) -> DisconnectReason {
        match self {
            Self::TooLarge { .. } => DisconnectReason::FrameTooLarge,
            Self::TooShort(_) | Self::ReservedFlags(_) => DisconnectReason::Malformed,
            Self::CounterExhausted => DisconnectReason::Normal,
        }
    }
}

/// A body that does not decode as the expected type: error `MALFORMED`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body ended in the middle of a field.
    #[error("body ended early: {needed} more bytes needed")]
    UnexpectedEnd {
        /// How many more bytes the field needed.
        needed: usize,
    },
    /// A `bool` byte other than 0 or 1.
    #[error("invalid bool byte {0}")]
    InvalidBool(u8),
    /// An `Option` tag other than 0 or 1.
    #[error("invalid option tag {0}")]
    InvalidOptionTag(u8),
    /// An enum variant index past the last variant.
    #[error("invalid variant index {index} for {type_name}")]
    InvalidVariant {
        /// The index read.
        index: u8,
        /// The enum's name.
        type_name: &'static str,
    },
    /// A varint longer than 5 bytes or above `u32::MAX`.
    #[error("invalid varint length")]
    InvalidVarint,
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A length or count that cannot fit in what remains of the body.
    #[error("length {len} exceeds the {remaining} bytes left in the body")]
    LengthTooLarge {
        /// The length or element count read.
        len: usize,
        /// The bytes left in the body.
        remaining: usize,
    },
    /// A value nested deeper (in `Box` or `Vec` levels) than the limit.
    #[error("value nested deeper than {0} levels")]
    TooDeep(usize),
    /// Bytes left after the last field.
    #[error("{0} trailing bytes after the last field")]
    TrailingBytes(usize),
    /// A value that the type rejects, with the type's explanation.
    #[error("invalid value: {0}")]
    Invalid(&'static str),
}
