use ternio::{Context, ErrorCode, FromContextAsync, Packet, Rejection, packet_controller};

/// Loaded from a database: only an async handler can wait for it.
struct Account;

impl FromContextAsync for Account {
    type Rejection = Rejection;
    async fn from_context_async(_ctx: &Context) -> Result<Self, Rejection> {
        Err(Rejection::new(ErrorCode::Unauthorized, "log in first"))
    }
}

#[derive(Packet)]
#[packet(opcode = 0x0010, response = ())]
struct Profile;

#[derive(Default)]
struct Accounts;

#[packet_controller]
impl Accounts {
    fn profile(_request: Profile, _account: Account) {}
}

fn main() {}
