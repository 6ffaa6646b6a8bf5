use ternio_macros::Codec;

#[derive(Codec)]
enum Never {}

fn main() {}
