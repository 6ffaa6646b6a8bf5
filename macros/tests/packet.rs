//! Compile tests of `#[derive(Packet)]` and `#[derive(Codec)]`: each
//! `packet/pass` file must build and run (it round-trips values through
//! `Encode`/`Decode`), each `packet/fail` file must fail with the error in its
//! `.stderr` snapshot. Refresh snapshots with `TRYBUILD=overwrite`.

#[test]
fn packet_derive() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/packet/pass/*.rs");
    cases.compile_fail("tests/packet/fail/*.rs");
}
