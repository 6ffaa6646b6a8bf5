//! docs/GUIDE.md quotes `examples/src/rooms.rs` and
//! `examples/web/rooms/rooms.js`: each block marked
//! `<!-- quoted from FILE -->` must appear in that file as it is (its
//! visible lines, without the lines rustdoc hides), so the guide and the
//! example cannot drift apart. (The Rust blocks are compiled and run as
//! doctests of this crate; the JavaScript is played by
//! `sdk-js/test/rooms.test.js`.)

use std::path::Path;

const MARK: &str = "<!-- quoted from ";

/// The blocks of `guide` marked as quoted: (file, visible text).
fn quoted_blocks(guide: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut rest = guide;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let (file, after) = after.split_once(" -->\n").expect("a closed mark");
        let after = after
            .strip_prefix("```")
            .expect("a code block right after the mark");
        let (_info, after) = after.split_once('\n').expect("a fence line");
        let (body, after) = after.split_once("\n```\n").expect("a closed block");
        let visible: Vec<&str> = body
            .lines()
            .filter(|line| !(line.starts_with("# ") || *line == "#"))
            .collect();
        blocks.push((file.to_owned(), visible.join("\n")));
        rest = after;
    }
    blocks
}

#[test]
fn the_guide_quotes_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let guide = std::fs::read_to_string(root.join("docs/GUIDE.md")).unwrap();
    let blocks = quoted_blocks(&guide);
    assert!(
        blocks.len() >= 5,
        "the guide quotes the packets, state, pushes, controller and rooms.js: found {}",
        blocks.len()
    );
    for (file, text) in blocks {
        let source = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        assert!(
            source.contains(&text),
            "docs/GUIDE.md quotes {file}, which no longer holds this:\n{text}"
        );
    }
}
