//! Compile tests of `Client::request_async`'s types: each `requests/pass`
//! file must build, each `requests/fail` file must fail with the error in its
//! `.stderr` snapshot. Refresh snapshots with `TRYBUILD=overwrite`.

#[test]
fn request_types() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/requests/pass/*.rs");
    cases.compile_fail("tests/requests/fail/*.rs");
}
