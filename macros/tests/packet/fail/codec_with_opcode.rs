use ternio_macros::Codec;

#[derive(Codec)]
#[packet(opcode = 0x0001)]
struct Point {
    x: i32,
}

fn main() {}
