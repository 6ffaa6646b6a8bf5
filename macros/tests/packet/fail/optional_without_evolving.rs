use ternio_macros::{Codec, Packet};

#[derive(Packet)]
#[packet(opcode = 0x0001)]
struct Profile {
    name: String,
    #[packet(optional)]
    avatar: Option<String>,
}

#[derive(Codec)]
struct Nested {
    #[packet(optional)]
    level: u32,
}

fn main() {}
