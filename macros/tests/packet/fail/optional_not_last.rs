use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001, evolving)]
struct Profile {
    name: String,
    #[packet(optional)]
    avatar: Option<String>,
    level: u32,
}

fn main() {}
