use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0010, response = 0x0011)]
struct Add {
    a: i32,
    b: i32,
}

fn main() {}
