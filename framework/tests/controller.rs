//! Compile tests of `#[packet_controller]`: each `controller/pass` file must
//! build and run, each `controller/fail` file must fail with the error in its
//! `.stderr` snapshot. Refresh snapshots with `TRYBUILD=overwrite`.

#[test]
fn packet_controller() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/controller/pass/*.rs");
    cases.compile_fail("tests/controller/fail/*.rs");
}
