use ternio_macros::Packet;

#[derive(Packet)]
struct Join {
    room: String,
}

fn main() {}
